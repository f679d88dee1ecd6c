"""The DeltaLLM vector processor on the AMD KV260 as a coaccel target (``kind: deltallm_fpga``).

Reference: :mod:`coaccel.models.deltallm`; simulator: :mod:`coaccel.sim.deltallm_fpga`;
architectures: ``arch_configs/deltallm_fpga/`` (the DeltaLLM processor and the TeLLMe-v2
baseline); RTL: ``rtl/deltallm/``. This folder adds its validation (``coaccel validate
deltallm``), the sparsity study (``coaccel delta``), its resource/power report part and its demo
stage, and the accuracy hook of a perplexity sweep objective (:mod:`.accuracy`).
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

_SIM = "coaccel.sim.deltallm_fpga"
_HERE = "coaccel.targets.deltallm_fpga"

TARGET = SimTarget(
    kind="deltallm_fpga",
    description="DeltaLLM vector processor / TeLLMe-v2 attention on the AMD KV260 (prefill)",
    modes=("analytical", "cycle"),
    arch_names=shipped_arch_names("deltallm_fpga"),
    load_arch=Ref(f"{_SIM}:load_arch"),
    load_workload=Ref(f"{_SIM}:load_workload"),
    simulate=Ref(f"{_SIM}:simulate"),
    config_type=Ref(f"{_SIM}:DeltaFpgaConfig"),
    priced_components=Ref(f"{_SIM}:priced_components"),
    accuracy_variant=Ref(f"{_HERE}.accuracy:accuracy_variant"),
    options=(("engine", "cycle mode's event engine: 'fast' (numba, default) or 'simpy'"),),
    report=ReportRole(
        summary="KV260 resources (LUT, FF, DSP, BRAM, URAM: modelled and Yosys on our RTL) "
        "and power / energy per token",
        build=Ref(f"{_HERE}.report:report_part"),
        default_workloads=("llama-3.2-1b",),
        default_scenario="prefill_256",
        demo_arch="kv260",
    ),
    validations=(
        ValidationSet(
            "deltallm",
            "DeltaLLM on the KV260: sparsity, speedup over TeLLMe-v2, resources",
            Ref(f"{_HERE}.commands:register_validate"),
        ),
    ),
    knobs=(
        Knob("datapath.lanes", "vector lanes (count; 24 no longer fits the KV260)", "[4, 8, 16]"),
        Knob("datapath.macs_per_lane", "MACs per lane (count)", "[8, 16]"),
        Knob("algorithm.theta", "Delta-Key threshold θ (key LSBs)", "[2, 4, 8]"),
        Knob("algorithm.window_tokens", "exact local window W (tokens)", "[8, 16, 32]"),
        Knob("algorithm.tau_log2", "column-skip threshold τ (log2)", "[6.0, 8.0, 10.0]"),
        Knob("freq_mhz", "clock (MHz)", "[200, 250, 300]"),
    ),
    demo=(
        DemoStage(
            "deltallm: reference -> event trace -> KV260 simulator vs TeLLMe-v2",
            Ref(f"{_HERE}.demo:stage_deltallm"),
            order=20,
        ),  # fmt: skip
    ),
    commands=(Ref(f"{_HERE}.delta_command:register"),),
    synthesis=(
        SynthesisSet(
            "deltallm",
            "DeltaLLM blocks on the KV260: LUT, FF, DSP, BRAM, URAM (synth_xilinx -abc9) and "
            "their share of the XCK26",
            table="deltallm_kv260.csv",
            rtl_folder="deltallm",
            groups=Ref(f"{_HERE}.synthesis:groups"),
            view="fpga",
            summary=Ref(f"{_HERE}.synthesis:summary"),
        ),
    ),
)
"""The DeltaLLM processor as :func:`coaccel.simulate`, the cost model, sweeps, reports,
validation, the demo and the command line see it."""

__all__ = ["TARGET"]
