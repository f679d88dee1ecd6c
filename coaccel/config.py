"""The public import path ``coaccel.config``: the same module as :mod:`coaccel.spine.config`.

The spine (config, units, errors, trace, workload) lives in :mod:`coaccel.spine`, the package's
lowest layer; this name is kept so that code written against ``coaccel.config`` keeps working and
sees the very same objects.
"""

import sys

from coaccel.spine import config as _module

sys.modules[__name__] = _module
