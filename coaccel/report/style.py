"""Shared look of the report charts: colour-blind-safe palettes, legends beside the data,
captions, and saving.

Every chart of :mod:`coaccel.report` is drawn on a constrained-layout :class:`Figure` with its
legend outside the axes (``fig.legend(loc="outside right upper")``: nothing covers a bar or an
error bar) and a caption under the axes that says where the numbers come from and how they were
made (source, seed, shapes, settings). The palettes are the Okabe-Ito and Paul Tol "muted"
qualitative schemes, designed to stay distinct for the common colour-vision deficiencies.
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from .files import write_bytes

__all__ = [
    "CAPTION_FONTSIZE",
    "OKABE_ITO",
    "TOL_MUTED",
    "add_caption",
    "display_arch",
    "new_figure",
    "save_figure",
]

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
)
"""Okabe & Ito (2008), "Color Universal Design": seven colours (black left out for error
bars and text)."""

TOL_MUTED = (
    "#CC6677",  # rose
    "#332288",  # indigo
    "#DDCC77",  # sand
    "#117733",  # green
    "#88CCEE",  # cyan
    "#882255",  # wine
    "#44AA99",  # teal
    "#999933",  # olive
    "#AA4499",  # purple
    "#DDDDDD",  # pale grey
)
"""Paul Tol's "muted" qualitative scheme (personal.sron.nl/~pault), nine colours plus its pale
grey."""

CAPTION_FONTSIZE = 7.0
"""Font size of captions, points."""

_CAPTION_LINE_IN = CAPTION_FONTSIZE * 1.35 / 72.0
"""Height of one caption line, inches."""


def new_figure(width_in: float, height_in: float, caption: str) -> Figure:
    """A constrained-layout figure with room for ``caption`` under the axes.

    Args:
        width_in: figure width, inches.
        height_in: height of the plotting area (axes, titles, legend), inches; the caption's
            lines are added to it.
        caption: the caption text (wrapped to the figure width).

    Returns:
        The figure, with the caption drawn; add axes with ``add_subplot`` / ``subplots``.
    """
    # ~0.6 em per character of the sans-serif caption font, with a margin.
    chars = max(40, int(width_in * 72.0 / (0.6 * CAPTION_FONTSIZE)) - 6)
    lines = []
    for para in caption.split("\n"):
        lines += textwrap.wrap(para, chars) or [""]
    cap_in = (len(lines) + 0.8) * _CAPTION_LINE_IN
    fig = Figure(figsize=(width_in, height_in + cap_in), layout="constrained")
    frac = cap_in / (height_in + cap_in)
    engine = fig.get_layout_engine()
    if not isinstance(engine, ConstrainedLayoutEngine):  # layout="constrained" above
        raise TypeError(f"expected a constrained layout, got {type(engine).__name__}")
    engine.set(rect=(0.0, frac, 1.0, 1.0 - frac))
    add_caption(fig, "\n".join(lines))
    return fig


def add_caption(fig: Figure, text: str) -> None:
    """Draw ``text`` (already wrapped) at the bottom left of ``fig``, labelled as its caption.

    Args:
        fig: the figure.
        text: the caption.
    """
    fig.text(
        0.01,
        0.005,
        text,
        ha="left",
        va="bottom",
        fontsize=CAPTION_FONTSIZE,
        color="#333333",
        gid="caption",
    )


_NODE_SUFFIX = re.compile(r"_\d+(?:\.\d+)?nm$")


def display_arch(name: str) -> str:
    """An architecture's name for a chart: its config name without the ``_<n>nm`` suffix
    (the chart's title states the node the figures are for).

    Args:
        name: the architecture's config name, e.g. ``hbq_e_28nm``.

    Returns:
        E.g. ``hbq_e``.
    """
    return _NODE_SUFFIX.sub("", name)


def save_figure(fig: Figure, base: Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Save ``fig`` as ``base.<format>`` for each format (SVG text stays text, searchable).

    Args:
        fig: the figure.
        base: path without suffix.
        formats: ``png`` (110 dpi) and/or ``svg``.

    Returns:
        The paths written, in ``formats`` order.
    """
    FigureCanvasAgg(fig)
    out = []
    for fmt in formats:
        path = base.with_suffix(f".{fmt}")
        buf = io.BytesIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            fig.savefig(buf, format=fmt, dpi=110)
        write_bytes(path, buf.getvalue())  # atomically: never a half-written image
        out.append(path)
    return out
