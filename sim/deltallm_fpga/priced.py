"""The DeltaLLM FPGA design (and a run of it) as the cost model's typed input.

FPGA designs are priced in resources (:class:`~coaccel.sim.common.FpgaResourceUse`): the DSP48E2
of the MAC array, the output rescale, the softmax unit and the normaliser, the BRAM and URAM
buffers, the LUTs and flip-flops, each with the run's activity on it (DSP operations, bytes read,
busy cycles), plus the DDR4 traffic (:class:`~coaccel.sim.common.OffChipUse`).
``coaccel.cost.price`` turns them into resource counts and energy with sources.
"""

from __future__ import annotations

from coaccel.sim.common import FpgaResourceUse, OffChipUse, PricedComponents

from .config import DeltaFpgaConfig
from .resources import dsp_breakdown, estimate_resources
from .result import DeltaFpgaResult

__all__ = ["priced_components"]


def priced_components(
    arch: DeltaFpgaConfig, result: DeltaFpgaResult | None = None
) -> PricedComponents:
    """What the design contains and, given a result, what the run did.

    Args:
        arch: the design.
        result: a simulation of it (None: the design only, no energy).

    Returns:
        The :class:`~coaccel.sim.common.PricedComponents` (``fpga`` components: ``mac_dsp``,
        ``rescale_dsp``, ``exp_dsp``, ``norm_dsp``, ``bram``, ``uram``, ``lut``, ``ff``, with
        activity in DSP operations, one per product tile and use; for the TeLLMe-v2 engine
        only its DSP and BRAM counts; ``offchip``: the DDR4). Energy covers the attention
        engine over the attention time (the linear-layer engine is not part of the design's
        resources).
    """
    r = estimate_resources(arch)
    dp = arch.datapath
    busy = result.attention_compute_cycles if result else 0
    cols = result.softmax_columns if result else 0
    pv = result.pv_operations if result else 0
    outs = result.normalized_outputs if result else 0
    if arch.engine == "tellme_v2":
        # the baseline's attention engine: its (estimated) DSP and BRAM counts, no activity model
        fpga: tuple[FpgaResourceUse, ...] = (
            FpgaResourceUse("attention_dsp", "dsp", r.dsps),
            FpgaResourceUse("attention_bram", "bram36", r.bram36),
        )
    else:
        dsp = dsp_breakdown(arch)
        fpga = (
            FpgaResourceUse("mac_dsp", "dsp", dsp["mac"], result.mac_operations if result else 0),
            FpgaResourceUse("rescale_dsp", "dsp", dsp["rescale"], pv * dp.rescale_dsps_per_mac),
            FpgaResourceUse(
                "exp_dsp", "dsp", dsp["softmax"], cols * dp.lanes * dp.exp_dsps_per_lane
            ),
            FpgaResourceUse(
                "norm_dsp", "dsp", dsp["normalizer"], outs * dp.normalizer_dsps_per_elem
            ),
            FpgaResourceUse("bram", "bram36", r.bram36, result.bram_read_bytes if result else 0),
            FpgaResourceUse("uram", "uram", r.urams, result.uram_read_bytes if result else 0),
            FpgaResourceUse("lut", "lut", r.luts, r.luts * busy),
            FpgaResourceUse("ff", "ff", r.ffs, r.ffs * busy),
        )
    d = arch.dram
    off = OffChipUse(
        "dram", d.type, d.energy_pj_per_byte, d.uncertainty_pct, d.source,
        result.offchip.read_bytes if result else 0, result.offchip.write_bytes if result else 0,
    )  # fmt: skip
    return PricedComponents(
        arch=arch.name,
        kind="deltallm_fpga",
        workload=result.workload if result else "",
        mode=result.mode if result else "",
        seconds=result.attention_cycles / (arch.freq_mhz * 1e6) if result else 0.0,
        macs=(),
        buffers=(),
        logic=(),
        offchip=(off,),
        fpga=fpga,
    )
