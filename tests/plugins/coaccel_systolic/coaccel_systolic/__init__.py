"""A weight-stationary systolic-array accelerator as a coaccel target (``kind: systolic``).

This package is a coaccel plug-in: it publishes :data:`TARGET` through the ``coaccel.targets``
entry point of its ``pyproject.toml``, and coaccel's ``simulate``, cost model, sweeps, reports,
validation and command line find it there; nothing in coaccel names it.

* :mod:`.config`: the architecture schema and the shipped ``arch_configs/systolic/*.yaml``;
* :mod:`.workload`: the dense GEMMs of a model workload, or one ``gemm:M=..,K=..,N=..``;
* :mod:`.schedule`: the weight-stationary tiling, transfers and SRAM accesses of a GEMM;
* :mod:`.analytical` and :mod:`.cycle`: the two fidelities (closed form; tile by tile);
* :mod:`.simulate`, :mod:`.result`: ``simulate`` and its :class:`~.result.SystolicResult`;
* :mod:`.priced`: the cost model's input; :mod:`.report`: the part of ``coaccel report``;
* :mod:`.validation`: ``coaccel validate systolic``.

Importing this module imports no simulator: every callable of :data:`TARGET` is a
:class:`~coaccel.spine.target.Ref`, resolved on first use.
"""

from coaccel.spine.target import Knob, Ref, ReportRole, SimTarget, ValidationSet

from .config import ARCH_NAMES, KIND
from .workload import WORKLOAD_KINDS

__all__ = ["TARGET"]

_PKG = "coaccel_systolic"

TARGET = SimTarget(
    kind=KIND,
    description="weight-stationary systolic array (rows x cols int MACs), SRAMs, DRAM "
    "[coaccel-systolic plug-in]",
    modes=("analytical", "cycle"),
    arch_names=ARCH_NAMES,
    load_arch=Ref(f"{_PKG}.config:load_arch"),
    load_workload=Ref(f"{_PKG}.workload:load_workload"),
    simulate=Ref(f"{_PKG}.simulate:simulate"),
    arch_file=Ref(f"{_PKG}.config:arch_file"),
    config_type=Ref(f"{_PKG}.config:SystolicArchConfig"),
    priced_components=Ref(f"{_PKG}.priced:priced_components"),
    options=(
        (
            "engine",
            "cycle mode's engine: 'fast' (numba tile loop, default) or 'simpy' "
            "(coaccel's event engine; small GEMMs)",
        ),
    ),
    format_result=Ref(f"{_PKG}.result:format_result"),
    workload_kinds=WORKLOAD_KINDS,
    report=ReportRole(
        summary="area by component (um2) and energy per run by component (J)",
        build=Ref(f"{_PKG}.report:report_part"),
        default_workloads=("llama-3.2-1b",),
        default_scenario="prefill_256",
    ),
    validations=(
        ValidationSet(
            "systolic",
            "systolic array: analytical vs cycle-approximate cycles on a set of GEMMs",
            Ref(f"{_PKG}.validation:register"),
        ),
    ),
    knobs=(
        Knob("array.rows", "PE rows: reduction elements per weight tile (count)", "[16, 32, 64]"),
        Knob("array.cols", "PE columns: output channels per weight tile (count)", "[16, 32, 64]"),
        Knob("sram.act_kib", "activation SRAM (KiB): sets the token tile", "[128, 256, 512]"),
        Knob("sram.weight_kib", "weight SRAM (KiB): sets the weight prefetch depth", "[8, 16]"),
        Knob("sram.out_kib", "output SRAM (KiB)", "[32, 64, 128]"),
        Knob("freq_mhz", "clock (MHz)", "[500, 1000]"),
    ),
)
"""The systolic array as coaccel sees it."""
