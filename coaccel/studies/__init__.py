"""Studies: pure computations over references and simulators that return data (no I/O).

* :mod:`.quant`: the quantization accuracy study behind ``coaccel quant``.
"""

from .quant import (
    DEFAULT_FORMATS,
    QuantRow,
    QuantStudyConfig,
    QuantStudyResult,
    RealDataConfig,
    SyntheticDataConfig,
    run_quant_study,
    sqnr_db,
)

__all__ = [
    "DEFAULT_FORMATS",
    "QuantRow",
    "QuantStudyConfig",
    "QuantStudyResult",
    "RealDataConfig",
    "SyntheticDataConfig",
    "run_quant_study",
    "sqnr_db",
]
