"""Yosys itself: finding it, the RTL folder, filling the script templates, running a script.

The script templates live in ``rtl/synth/`` beside the committed tables:

* ``asic.ys``: ``synth``, every flip-flop lowered to a plain D flip-flop (``dfflegalize``),
  ``abc -g cmos2`` (NAND / NOR / NOT), ``stat -tech cmos`` (generic-cell counts and Yosys's CMOS
  transistor estimate);
* ``asic_array.ys``: the same with kept hierarchy levels and black-box SRAM macros (a point with
  ``keep`` or ``macros``);
* FPGA templates (a point's ``fpga_template``): ``synth_xilinx -family xcup`` (UltraScale+).

Each holds the placeholders ``@SOURCES@``, ``@TOP@``, ``@CHPARAMS@``, ``@KEEP@`` and
``@MACROS@``.

Public: :func:`find_yosys`, :func:`yosys_version`, :func:`find_rtl_dir`, :func:`asic_script`,
:func:`fpga_script`, :func:`source_digest`, :func:`run_yosys`.
Internal: ``_fill`` (a template with a point's sources and parameters).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..spine.errors import CoaccelError, MissingDependencyError
from .point import SynthError, SynthPoint

__all__ = [
    "asic_script",
    "find_rtl_dir",
    "find_yosys",
    "fpga_script",
    "run_yosys",
    "source_digest",
    "yosys_version",
]


def find_yosys(yosys: str | None = None) -> str:
    """Path of the Yosys executable.

    Args:
        yosys: an explicit path or name; default ``$COACCEL_YOSYS`` or ``yosys`` on ``PATH``.

    Returns:
        The resolved path.

    Raises:
        MissingDependencyError: Yosys is not found.
    """
    name = yosys or os.environ.get("COACCEL_YOSYS") or "yosys"
    path = shutil.which(name)
    if path is None:
        raise MissingDependencyError(
            f"Yosys ({name!r}) is not on PATH; install it (Debian/Ubuntu: apt-get install yosys)"
        )
    return path


def yosys_version(yosys: str) -> str:
    """The version line of a Yosys executable, e.g. ``"Yosys 0.23 (git sha1 7ce5011c24b)"``."""
    out = subprocess.run([yosys, "-V"], capture_output=True, text=True, check=True)
    line = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    if not line.startswith("Yosys"):
        raise SynthError(f"{yosys} -V printed {out.stdout!r}, not a Yosys version")
    return line


def find_rtl_dir(start: Path | None = None, subfolder: str | None = None) -> Path:
    """The repository's ``rtl/`` folder (it is not part of the installed package).

    Looks in ``start`` (default: the working directory) and its parents, then next to the
    source tree of this package (editable installs).

    Args:
        start: where to start looking.
        subfolder: a folder the ``rtl/`` folder must also hold (a synthesis set's
            ``rtl_folder``); None: only ``synth/`` is required.

    Returns:
        The ``rtl`` directory (it contains ``synth/``, and ``subfolder`` when given).

    Raises:
        CoaccelError: no such directory is found.
    """
    here = (start or Path.cwd()).resolve()
    candidates = [p / "rtl" for p in (here, *here.parents)]
    candidates.append(Path(__file__).resolve().parents[2] / "rtl")
    needs = ["synth", *([subfolder] if subfolder else [])]
    for c in candidates:
        if all((c / n).is_dir() for n in needs):
            return c
    with_ = " and ".join(f"{n}/" for n in needs)
    raise CoaccelError(
        f"cannot find the rtl/ folder (with {with_}); run from a coaccel checkout or pass --rtl-dir"
    )


def _fill(template: str, point: SynthPoint, rtl_dir: Path) -> str:
    sources = []
    for m in point.modules:
        path = Path(rtl_dir).resolve() / point.area / f"{m}.v"
        if not path.is_file():
            raise SynthError(f"{point.slug}: source {path} does not exist")
        sources.append(str(path))
    chparams = " ".join(f"-chparam {k} {v}" for k, v in point.params)
    # Derived (parameterized) modules are named "$paramod...\\<module>": match by the suffix.
    keep = " ".join(f"*{m}" for m in point.keep)
    macros = " ".join(f"*{m}" for m in point.macros)
    return (
        template.replace("@SOURCES@", " ".join(sources))
        .replace("@TOP@", point.top)
        .replace("@CHPARAMS@", chparams)
        .replace("@KEEP@", keep)
        .replace("@MACROS@", macros)
    )


def asic_script(point: SynthPoint, rtl_dir: Path) -> str:
    """The ASIC-view Yosys script of a point (``rtl/synth/<point.asic_template>`` filled in)."""
    return _fill((rtl_dir / "synth" / point.asic_template).read_text(), point, rtl_dir)


def fpga_script(point: SynthPoint, rtl_dir: Path) -> str:
    """The FPGA-view Yosys script of a point (``rtl/synth/<point.fpga_template>`` filled in)."""
    return _fill((rtl_dir / "synth" / point.fpga_template).read_text(), point, rtl_dir)


def source_digest(point: SynthPoint, rtl_dir: Path, *, asic: bool = True) -> str:
    """A short digest of what a point's row depends on: its Verilog files and its scripts.

    Args:
        point: the design point.
        rtl_dir: the ``rtl/`` folder.
        asic: include the ASIC-view template (False for a table of the FPGA view only).

    Returns:
        The first 16 hex digits of the SHA-256 over the module files (in ``point.modules``
        order) and the point's script templates (ASIC, then the FPGA view), each prefixed by
        its name.
    """
    root = Path(rtl_dir).resolve()
    h = hashlib.sha256()
    files = [root / point.area / f"{m}.v" for m in point.modules]
    if asic:
        files.append(root / "synth" / point.asic_template)
    files.append(root / "synth" / point.fpga_template)
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run_yosys(
    yosys: str,
    script: str,
    work: Path,
    name: str,
    timeout_s: float,
    *,
    reuse: bool = False,
    sources_key: str = "",
) -> str:
    """Run one Yosys script and return its complete log.

    The script goes to ``work/<name>.ys``, the log to ``work/<name>.log`` and, once the run
    succeeded, ``sources_key`` to ``work/<name>.sources``.

    Args:
        yosys: the Yosys executable (:func:`find_yosys`).
        script: the script text (:func:`asic_script`, :func:`fpga_script`).
        work: the folder of the script and log (created).
        name: their file stem (``"asic"``, ``"fpga"``).
        timeout_s: wall-clock limit of the run, seconds.
        reuse: return the existing log instead of running Yosys when it is a finished run
            (it reaches ``End of script.``) of exactly this script with this ``sources_key``.
        sources_key: what the sources were (:func:`source_digest`); a log recorded with
            another key, or with none, is not reused.

    Returns:
        The log text.

    Raises:
        SynthError: Yosys exited with an error or ran past ``timeout_s``.
    """
    work = Path(work).resolve()  # Yosys runs in ``work``: its file arguments must be absolute
    work.mkdir(parents=True, exist_ok=True)
    ys = work / f"{name}.ys"
    log = work / f"{name}.log"
    key = work / f"{name}.sources"
    if (
        reuse
        and ys.is_file()
        and log.is_file()
        and key.is_file()
        and ys.read_text() == script
        and key.read_text() == sources_key
    ):
        text = log.read_text()
        if "End of script." in text:
            return text
    key.unlink(missing_ok=True)
    ys.write_text(script)
    try:
        proc = subprocess.run(
            [yosys, "-q", "-l", str(log), "-s", str(ys)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=work,
        )
    except subprocess.TimeoutExpired as exc:
        raise SynthError(f"{work.name}/{name}: Yosys ran past {timeout_s:.0f} s") from exc
    text = log.read_text() if log.is_file() else ""
    if proc.returncode != 0:
        tail = (proc.stderr or text)[-2000:]
        raise SynthError(f"{work.name}/{name}: Yosys exited with {proc.returncode}:\n{tail}")
    key.write_text(sources_key)
    return text
