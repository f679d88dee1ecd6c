"""The public import path ``coaccel.workload``: the same module as :mod:`coaccel.spine.workload`.

The spine (config, units, errors, trace, workload) lives in :mod:`coaccel.spine`, the package's
lowest layer; this name is kept so that code written against ``coaccel.workload`` keeps working and
sees the very same objects.
"""

import sys

from coaccel.spine import workload as _module

sys.modules[__name__] = _module
