"""GPU memory hierarchies as a coaccel target (``kind: gpu``).

Reference: :mod:`coaccel.models.gpu` (FlashDecoding split-K, FFD, NOSA, Specter); simulator:
:mod:`coaccel.sim.gpu_mem`; architectures: ``arch_configs/gpu/``. This folder adds its
validation against measured anchors (``coaccel validate gpu``), the calibration fit
(``coaccel gpu-calibrate``), its energy-per-token report part, its demo stages and the accuracy
hook of a perplexity sweep objective (:mod:`.accuracy`).
"""

from coaccel.spine.target import (
    DemoStage,
    Knob,
    Ref,
    ReportRole,
    SimTarget,
    ValidationSet,
    shipped_arch_names,
)

_SIM = "coaccel.sim.gpu_mem"
_HERE = "coaccel.targets.gpu"

TARGET = SimTarget(
    kind="gpu",
    description="GPU memory hierarchy: sectored near/far L2, HBM channels, host link, streams",
    modes=("analytical", "cycle"),
    arch_names=shipped_arch_names("gpu"),
    load_arch=Ref(f"{_SIM}:load_arch"),
    load_workload=Ref(f"{_SIM}:load_workload"),
    simulate=Ref(f"{_SIM}:simulate"),
    simulate_batch=Ref(f"{_SIM}._batch:simulate_batch"),
    config_type=Ref(f"{_SIM}:GpuArchConfig"),
    priced_components=Ref(f"{_SIM}:priced_components"),
    accuracy_variant=Ref(f"{_HERE}.accuracy:accuracy_variant"),
    workload_kinds=(
        "a GPU trace (.npz), or a generator spec such as 'splitk:context=131072' "
        "(flashdecode, splitk, ffd, nosa, specter, stream)"
    ),
    report=ReportRole(
        summary="decode energy per token and per request (J) from board power against "
        "utilization, with its uncertainty",
        build=Ref(f"{_HERE}.report:report_part"),
        default_workloads=("flashdecode:B=8,T=4096",),
        demo_arch="h200",
    ),
    validations=(
        ValidationSet(
            "gpu",
            "GPU memory hierarchy: bandwidth curves, L2 knees, latencies, PCIe copy shape, "
            "W1 decode time vs context",
            Ref(f"{_HERE}.commands:register_validate"),
        ),
    ),
    knobs=(
        Knob("sm.count", "streaming multiprocessors (count)", "[108, 132]"),
        Knob(
            "dram",
            "HBM preset (file under arch_configs/dram/)",
            "[dram/hbm3_h100_sxm.yaml, dram/hbm3e_h200.yaml]",
        ),  # fmt: skip
        Knob(
            "l2.effective_capacity_mib",
            "L2 capacity data may use (MiB; at most l2.capacity_mib)",
            "[32, 40, 44]",
        ),
        Knob("host_link.h2d_bw_gb_per_s", "host-to-device link bandwidth (GB/s)", "[32, 64]"),
        Knob("launch_overhead_us", "kernel launch latency (us)", "[2, 4]"),
    ),
    demo=(
        DemoStage(
            "gpu: FlashDecoding split-K reference, 128K trace, W1 time on H200 and A100, "
            "W3 NOSA KV offload over PCIe and C2C",
            Ref(f"{_HERE}.demo:stage_gpu"),
            order=20,
        ),  # fmt: skip
    ),
    commands=(
        Ref(f"{_HERE}.calibrate_command:register"),
        Ref(f"{_HERE}.step_command:register"),
    ),
)
"""GPUs as :func:`coaccel.simulate`, the cost model, sweeps, reports, validation, the demo and
the command line see them."""

__all__ = ["TARGET"]
