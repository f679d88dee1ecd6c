"""The HBQ datapath reference ([R-ACC], [R-EXT]): the exact integer dot product of one
processing element, binary16/binary32 rounding and the FP16 adder, partial-sum accumulation modes,
the block GEMM built on them, the GEMM trace for the simulators and the traces of whole transformer
workloads (prefill and decode) on the HBQ accelerator.

See ``docs/hbq_datapath.md`` for the stage-by-stage description the RTL follows.
"""

from . import _datapath, _fp, _gemm, _psum, _trace, _workload
from ._datapath import *  # noqa: F403  (curated by _datapath.__all__)
from ._fp import *  # noqa: F403
from ._gemm import *  # noqa: F403
from ._psum import *  # noqa: F403
from ._trace import *  # noqa: F403
from ._workload import *  # noqa: F403

__all__ = [
    *_datapath.__all__,
    *_fp.__all__,
    *_gemm.__all__,
    *_psum.__all__,
    *_trace.__all__,
    *_workload.__all__,
]
