"""The HBQ 28 nm ASIC as a coaccel target (``kind: hbq_asic``).

Reference: :mod:`coaccel.models.hbq`; simulator: :mod:`coaccel.sim.hbq_asic`; architectures:
``arch_configs/hbq_asic/``; RTL: ``rtl/hbq/``. This folder adds its validation against the HBQ
paper (``coaccel validate hbq``), its area/energy report part, its result text and its demo
stages.
"""

from coaccel.spine.target import (
    DemoStage,
    Knob,
    Ref,
    ReportRole,
    SimTarget,
    SynthesisSet,
    ValidationSet,
    shipped_arch_names,
)

_SIM = "coaccel.sim.hbq_asic"
_HERE = "coaccel.targets.hbq_asic"

TARGET = SimTarget(
    kind="hbq_asic",
    description="HBQ 28 nm ASIC: weight-stationary PE array, banked buffers, partial sums, DRAM",
    modes=("analytical", "cycle"),
    arch_names=shipped_arch_names("hbq_asic"),
    load_arch=Ref(f"{_SIM}:load_arch"),
    load_workload=Ref(f"{_SIM}:load_workload"),
    simulate=Ref(f"{_SIM}:simulate"),
    simulate_batch=Ref(f"{_SIM}._batch:simulate_batch"),
    config_type=Ref(f"{_SIM}:HbqArchConfig"),
    priced_components=Ref(f"{_SIM}:priced_components"),
    options=(("engine", "cycle mode's event engine: 'fast' (numba, default) or 'simpy'"),),
    format_result=Ref(f"{_HERE}.results:format_stats"),
    operand_format=Ref(f"{_SIM}.config:operand_format"),
    energy_validation=Ref(f"{_HERE}.validation:system_energy_validation"),
    report=ReportRole(
        summary="area by component (um2) and energy per run by component (J), PE per MAC",
        build=Ref(f"{_HERE}.report:report_part"),
        default_workloads=(
            "llama-2-7b",
            "llama-3-8b",
            "llama-3.2-3b",
            "qwen2.5-3b",
            "qwen2.5-7b",
        ),  # fmt: skip
        default_scenario="prefill_2k",
        demo_arch="hbq_e_28nm",
    ),
    validations=(
        ValidationSet(
            "hbq",
            "HBQ (MICRO 2026): PE area/energy, claims, system energy, iso-area speedups",
            Ref(f"{_HERE}.commands:register_validate"),
        ),
    ),
    knobs=(
        Knob("pe_array.n_pes", "processing elements in the array (count)", "[16, 32, 64]"),
        Knob("pe_array.macs_per_pe", "MACs per PE (count)", "[64, 128]"),
        Knob(
            "buffers.psum.size_kib",
            "partial-sum buffer (KiB; beyond 136 it needs a larger ACT buffer)",
            "[34, 68, 136]",
        ),
        Knob("buffers.act.size_kib", "activation buffer (KiB)", "[96, 192]"),
        Knob("formats.weight.ub_elems", "weight micro-block (elements per L2 scale)", "[8, 32]"),
        Knob("formats.weight.block_elems", "weight block (elements per L1 scale)", "[64, 128]"),
        Knob("freq_mhz", "clock (MHz)", "[400, 500]"),
    ),
    demo=(
        DemoStage(
            "hbq: exact datapath GEMM, partial-sum modes, trace",
            Ref(f"{_HERE}.demo:stage_datapath"),
            order=10,
        ),  # fmt: skip
        DemoStage(
            "simulators: HBQ ASIC, cycle-approximate vs analytical",
            Ref(f"{_HERE}.demo:stage_simulators"),
            order=20,
        ),  # fmt: skip
    ),
    demo_sweep="demo_buffers.yaml",
    synthesis=(
        SynthesisSet(
            "hbq",
            "HBQ blocks: CMOS gates and transistors, UltraScale+ cells; PE sweeps vs the "
            "published 28 nm areas",
            table="hbq_area.csv",
            rtl_folder="hbq",
            groups=Ref(f"{_HERE}.synthesis:groups"),
            view="asic+fpga",
            summary=Ref(f"{_HERE}.synthesis:summary"),
            default=True,
        ),
    ),
)
"""The HBQ ASIC as :func:`coaccel.simulate`, the cost model, sweeps, reports, validation, the
demo and the command line see it."""

__all__ = ["TARGET"]
