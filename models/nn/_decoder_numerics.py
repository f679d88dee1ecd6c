"""Per-operand number formats of a decoder's forward pass (see :mod:`coaccel.models.nn.decoder`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from coaccel.models.formats import FormatSpec, quantize, resolve


# ---------------------------------------------------------------------------------- numerics
@dataclass(frozen=True)
class OperandFormat:
    """A number format for one operand class, as :func:`coaccel.models.formats.quantize` takes it.

    Attributes:
        fmt: format name (``coaccel.models.formats.format_names()``), e.g. ``"mxfp4"``, or a
            resolved format spec (e.g. an architecture's operand format).
        options: keyword options of ``quantize`` as ``(name, value)`` pairs, e.g.
            ``(("role", "activation"),)`` for HBQ or ``(("rounding", "rne"),)``.
    """

    fmt: str | FormatSpec
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(
        cls, spec: OperandFormat | str | FormatSpec | tuple[str, Mapping[str, Any]]
    ) -> OperandFormat:
        """Normalize ``"mxfp4"``, ``("hbq-a", {"role": "activation"})``, a resolved format spec
        or an OperandFormat."""
        if isinstance(spec, OperandFormat):
            return spec
        if isinstance(spec, str):
            return cls(spec)
        if not isinstance(spec, tuple) and hasattr(spec, "quantize_blocks"):
            return cls(spec)
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], Mapping):
            return cls(str(spec[0]), tuple(sorted(spec[1].items())))
        raise TypeError(
            "a number format is a name ('mxfp4'), a (name, options) pair "
            f"(('hbq-a', {{'role': 'activation'}})) or an OperandFormat; got {spec!r}"
        )

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Quantize ``x`` along its last axis and dequantize it back to ``x.dtype``.

        Args:
            x: float array, blocked along the last axis.

        Returns:
            Array of the same shape and dtype holding the format's exact values.
        """
        q = quantize(x, self.fmt, axis=-1, **dict(self.options))
        return q.dequantize(x.dtype)

    def __str__(self) -> str:
        name = self.fmt if isinstance(self.fmt, str) else self.fmt.name
        opts = ",".join(f"{k}={v}" for k, v in self.options)
        return f"{name}({opts})" if opts else name


FormatLike = OperandFormat | str | tuple[str, Mapping[str, Any]]
_QUANTIZE_KEYS = ("rounding", "backend", "pad", "nonfinite")


@dataclass(frozen=True)
class Numerics:
    """Number formats of a forward pass, per operand class (None = the model's float dtype).

    Attributes:
        weights: format of the linear layers' weights (q, k, v, o, gate, up, down), blocked
            along the input features; applied once, when the model is built.
        activations: format of the linear layers' inputs, blocked along the features of each
            token.
        kv: format of the keys (after RoPE) and values entering the KV cache, blocked along
            ``head_dim`` per token and head.
        lm_head: also apply ``weights`` to the LM head and ``activations`` to its input (the
            token embedding lookup stays in float).
    """

    weights: OperandFormat | None = None
    activations: OperandFormat | None = None
    kv: OperandFormat | None = None
    lm_head: bool = False

    def __post_init__(self) -> None:
        for name in ("weights", "activations", "kv"):
            v = getattr(self, name)
            if v is not None:
                of = OperandFormat.of(v)
                # Fail now on an unknown format or option (quantize's own keywords aside).
                resolve(of.fmt, **{k: val for k, val in of.options if k not in _QUANTIZE_KEYS})
                object.__setattr__(self, name, of)

    @classmethod
    def of(
        cls,
        weights: FormatLike | None = None,
        activations: FormatLike | None = None,
        kv: FormatLike | None = None,
        *,
        lm_head: bool = False,
    ) -> Numerics:
        """Build from format names or ``(name, options)`` pairs (see :class:`OperandFormat`)."""
        return cls(
            cast("OperandFormat | None", weights),
            cast("OperandFormat | None", activations),
            cast("OperandFormat | None", kv),
            lm_head,
        )

    @property
    def is_float(self) -> bool:
        """True when no operand is quantized."""
        return self.weights is None and self.activations is None and self.kv is None

    def __str__(self) -> str:
        parts = [
            f"{n}={getattr(self, n)}" for n in ("weights", "activations", "kv") if getattr(self, n)
        ]
        if self.lm_head:
            parts.append("lm_head")
        return ", ".join(parts) or "float"
