"""A compiler wrapper that shares Verilator's runtime objects between the builds of one test run.

Every Verilator build compiles, besides the (small) model of its design, the same runtime
sources again: ``verilated.cpp``, ``verilated_vpi.cpp``, ``verilated_threads.cpp``,
``verilated_dpi.cpp`` and cocotb's ``verilator.cpp`` main, about 17 s of CPU out of a
build's 19 s. Verilator's makefile puts ``$(OBJCACHE)`` in front of every compile command (the
hook meant for ccache); :func:`rtlkit.run_cocotb` sets it to this script when
``COACCEL_OBJCACHE_DIR`` names a cache directory (``tests/rtl/conftest.py`` sets one per pytest
session, shared by the xdist workers).

Usage (as make runs it)::

    objcache.py c++ -Os -I. -MMD ... -c -o verilated.o /path/to/verilated.cpp

Only compiles of a source outside the build directory are cached (the runtime and the cocotb
main, identical for every design); the design's own sources always compile. The key is the
compile command (without its output names) and the preprocessed source, as in ccache's
preprocessor mode, so a header that differs between builds (cocotb's main includes the
design's ``Vtop.h``) gives a different key. A hit copies the object and its ``-MMD`` dependency
file into place; a miss compiles and then stores both atomically, so that workers compiling the
same file at once simply both store it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE_ENV = "COACCEL_OBJCACHE_DIR"
"""Environment variable naming the cache directory (no caching when unset)."""
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
_DEP_FLAGS = ("-MMD", "-MD", "-MP")
_DEP_FLAGS_WITH_VALUE = ("-MF", "-MT", "-MQ")


def _outputs(args: list[str], source: str) -> tuple[Path, Path | None]:
    """The object file and the ``-MMD``/``-MD`` dependency file a compile command writes."""
    obj = Path(args[args.index("-o") + 1]) if "-o" in args else Path(Path(source).stem + ".o")
    if "-MF" in args:
        return obj, Path(args[args.index("-MF") + 1])
    if any(f in args for f in ("-MMD", "-MD")):
        return obj, obj.with_suffix(".d")
    return obj, None


def _preprocess_command(args: list[str]) -> list[str]:
    """The compile command with ``-c``, ``-o X`` and the dependency flags replaced by ``-E``."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", *_DEP_FLAGS_WITH_VALUE):
            skip = True
        elif a not in ("-c", *_DEP_FLAGS):
            out.append(a)
    return [*out, "-E"]


def _cache_key(args: list[str], obj: Path, dep: Path | None) -> str | None:
    """sha256 of the command (output names left out) and the preprocessed source, or None if
    preprocessing fails (then the compile runs uncached and reports the error itself)."""
    pre = subprocess.run(_preprocess_command(args), capture_output=True)
    if pre.returncode != 0:
        return None
    h = hashlib.sha256()
    named = {str(obj), str(dep)}
    for a in args:
        h.update(b"<out>" if a in named else a.encode())
        h.update(b"\0")
    h.update(pre.stdout)
    return h.hexdigest()


def _store(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` through a temporary file in ``dest``'s folder (atomic)."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(src.read_bytes())
    os.replace(tmp, dest)


def main(args: list[str]) -> int:
    """Run (or replay from the cache) one compile command; returns its exit status."""
    cache = os.environ.get(CACHE_ENV)
    sources = [a for a in args[1:] if a.endswith(SOURCE_SUFFIXES)]
    cacheable = cache and "-c" in args and len(sources) == 1 and "-" not in args
    if cacheable:
        source = Path(sources[0]).resolve()
        cacheable = Path.cwd().resolve() not in source.parents
    if not cacheable:
        return subprocess.call(args)
    obj, dep = _outputs(args, sources[0])
    key = _cache_key(args, obj, dep)
    if key is None:
        return subprocess.call(args)
    root = Path(cache)  # type: ignore[arg-type]
    root.mkdir(parents=True, exist_ok=True)
    cached_obj, cached_dep = root / f"{key}.o", root / f"{key}.d"
    if cached_obj.is_file() and (dep is None or cached_dep.is_file()):
        _store(cached_obj, obj)
        if dep is not None:
            _store(cached_dep, dep)
        return 0
    rc = subprocess.call(args)
    if rc == 0:
        if dep is not None and dep.is_file():
            _store(dep, cached_dep)
        _store(obj, cached_obj)  # last: a present object means a complete entry
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
