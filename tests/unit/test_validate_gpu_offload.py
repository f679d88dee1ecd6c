"""W3 / W4 rows of ``coaccel validate gpu`` (quick settings)."""

import pytest

from coaccel.targets.gpu.offload import offload_anchors
from coaccel.targets.gpu.validation import _default_simulate


@pytest.fixture(scope="module")
def rows():
    return offload_anchors(_default_simulate, quick=True)


def test_rows_and_sources(rows):
    anchors, notes = rows
    groups = {a.group for a in anchors}
    assert groups == {"w3", "w3_error", "w4"}
    assert all(a.fit == "predicted" for a in anchors)
    by = {a.name: a for a in anchors}
    assert by["NOSA attention step vs FullAttn (W1, KV in HBM), speedup"].paper == 5.04
    assert any(a.paper == 1.50 for a in anchors if a.group == "w4")
    assert notes


def test_locality_pays_off_and_error_falls_with_keep(rows):
    anchors, _ = rows
    vs_topk = next(a for a in anchors if "top-k" in a.name)
    assert vs_topk.ours > 1.0  # fewer host fetches than the unconstrained selector
    errs = [a.ours for a in anchors if a.group == "w3_error"]
    assert errs == sorted(errs, reverse=True)
    assert errs[-1] < 2**-7  # keep 1.0: dense up to bf16 rounding
