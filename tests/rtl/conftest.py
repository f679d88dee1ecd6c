"""Make the RTL test helpers (``rtlkit``, ``hbq_stim``) importable by the launchers.

pytest runs with ``--import-mode=importlib`` and ``pythonpath = ["tests"]``, which does not put
``tests/rtl/`` on ``sys.path``; the launchers ``import rtlkit``, and ``rtlkit.run_cocotb`` hands
this ``sys.path`` to the simulator, where the testbench modules are imported by name.
"""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
