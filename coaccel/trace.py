"""The public import path ``coaccel.trace``: the same module as :mod:`coaccel.spine.trace`.

The spine (config, units, errors, trace, workload) lives in :mod:`coaccel.spine`, the package's
lowest layer; this name is kept so that code written against ``coaccel.trace`` keeps working and
sees the very same objects.
"""

import sys

from coaccel.spine import trace as _module

sys.modules[__name__] = _module
