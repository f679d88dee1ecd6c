"""What the ``data: real`` rows of ``coaccel validate deltallm`` run on (:class:`RealInputs`)
and the decoders they can use (:data:`REAL_MODELS`). Kept free of numpy so that the command
line can show its defaults without importing the numerics."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REAL_MODELS", "RealInputs"]

REAL_MODELS = ("smollm2-135m", "gemma3-270m")
"""Decoders (:func:`coaccel.models.nn.load_decoder` names) the real-input rows can run."""


@dataclass(frozen=True)
class RealInputs:
    """The real inputs of the ``data: real`` rows.

    Attributes:
        model: a decoder of :data:`REAL_MODELS`.
        passages: pydoc passages (the statistics' samples; at least 2 for a spread).
        tokens: tokens per passage, T.
        layers: decoder layers run through the datapath (None: all); the speedup scales the
            simulated layers' cycles to every layer.
        thetas: Delta-Key thresholds of the ρ_K rows besides the design's θ.
    """

    model: str = "smollm2-135m"
    passages: int = 8
    tokens: int = 512
    layers: tuple[int, ...] | None = None
    thetas: tuple[int, ...] = (8,)
