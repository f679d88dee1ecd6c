"""Values outside a format's scale range are reported, not silently mangled: the result counts
the clamped blocks (``QuantizedTensor.clamped_blocks``) and ``quantize`` warns once per format."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from coaccel.models.formats import QuantizationRangeWarning, quantize
from coaccel.models.formats import _quantized as qmod


@pytest.fixture(autouse=True)
def _fresh_warning_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qmod, "_WARNED", set())


def _data(scale: float) -> np.ndarray:
    return (np.random.default_rng(3).standard_normal((16, 256)) * scale).astype(np.float32)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("fmt", ["hbq-a", "nvfp4_e5m3"])
@pytest.mark.parametrize("scale", [1e6, 1e-10])
def test_out_of_range_blocks_are_counted_and_warned(fmt: str, scale: float, backend: str) -> None:
    with pytest.warns(QuantizationRangeWarning, match=fmt):
        q = quantize(_data(scale), fmt, backend=backend)
    # E5M3 spans [2**-14, 61440]: x 6 (the element maximum) is far below 1e6-sized values and
    # far above 1e-10-sized ones, so every block is clamped.
    assert q.clamped_blocks == q.n_blocks
    err = np.linalg.norm(q.dequantize(np.float64) - _data(scale)) / np.linalg.norm(_data(scale))
    assert err > 0.3  # what the warning is about


@pytest.mark.parametrize("fmt", ["hbq-a", "hbq-e", "nvfp4", "nvfp4_e5m3", "mxfp4", "mxfp8_e4m3"])
def test_in_range_data_has_no_clamped_blocks(fmt: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuantizationRangeWarning)
        q = quantize(_data(1.0), fmt)
    assert q.clamped_blocks == 0


def test_only_the_out_of_range_blocks_count() -> None:
    x = _data(1.0)
    x[3, :128] *= 1e7  # one 128-element HBQ block far above the E5M3 range
    x[5, 128:] = 0.0  # an all-zero block is representable (not clamped)
    with pytest.warns(QuantizationRangeWarning):
        q = quantize(x, "hbq-a")
    assert q.clamped_blocks == 1


def test_warns_once_per_format() -> None:
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            quantize(_data(1e6), "hbq-a")
        quantize(_data(1e6), "nvfp4_e5m3")
    hits = [r for r in rec if issubclass(r.category, QuantizationRangeWarning)]
    assert [str(r.message).split(":")[0] for r in hits] == ["hbq-a", "nvfp4_e5m3"]


@pytest.mark.parametrize("fmt", [None, 3, object()])
def test_format_must_be_a_name_or_spec(fmt: object) -> None:
    with pytest.raises(TypeError, match="valid formats: .*hbq-a"):
        quantize(_data(1.0), fmt)  # type: ignore[arg-type]
