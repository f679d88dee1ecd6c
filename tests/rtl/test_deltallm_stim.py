"""The DeltaLLM testbench accessors (``deltallm_stim``) reproduce the reference exactly.

``vssos_steps`` and ``normalise`` expose per-column intermediates that
``coaccel.models.deltallm.attention`` keeps internal; the RTL testbenches compare against them,
so they must give the reference's final outputs and skip decisions bit for bit.
"""

from __future__ import annotations

import math

import deltallm_stim as stim
import numpy as np
import pytest


@pytest.mark.parametrize("denom_mode", ["full", "kept"])
@pytest.mark.parametrize("tau", [1.0, 4.0, math.inf])
def test_vssos_steps_reproduce_attention(tau, denom_mode):
    rng = np.random.default_rng(3)
    skipped = 0
    for kind in stim.KEY_CLASSES:
        for b in stim.attention_blocks(
            rng, d=16, t_n=20, g=2, p_q=2, theta=3, window=4, tau=tau, key_kind=kind,
            denom_mode=denom_mode, q_scale=0.5,
        ):  # fmt: skip
            n = len(b.scores)
            st = stim.vssos_steps(b.scores, b.valid, b.v[:n], b.mant, b.sh, b.tau_e, denom_mode)
            assert np.array_equal(stim.normalise(st.o, st.den[-1], st.started), b.output)
            assert np.array_equal(st.skip, b.skipped)
            skipped += int(st.skip.sum())
    assert (skipped > 0) == (not math.isinf(tau))


def test_key_classes_cover_their_corners():
    rng = np.random.default_rng(0)
    const = stim.key_sequence(rng, "constant", 8, 16)
    assert np.all(const == const[0])
    sat = stim.key_sequence(rng, "saturate", 8, 16)
    assert set(np.unique(sat).tolist()) <= {-128, -127, 127}
    with pytest.raises(ValueError, match="valid"):
        stim.key_sequence(rng, "nope", 2, 2)
