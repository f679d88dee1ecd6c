"""Fuzzing the loaders users hand files to: architecture configs of every shipped target, workload
configs, sweep specs and trace files. Whatever the input (random structures and types, unit
strings, unicode, huge and negative numbers, NaN and infinity, wrong nesting, random bytes), the
only outcomes are a loaded object or a CoaccelError (ConfigError and TraceError are ones): any
other exception is a loader bug.

Derandomized (the same examples on every run, as CI needs) and without an example database
(tests write only under tmp_path); each test stays well under 20 s.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coaccel import arch_configs
from coaccel.spine.config import ConfigError, Problem
from coaccel.spine.errors import CoaccelError
from coaccel.spine.trace import Trace, TraceBuilder

ROOT = Path(__file__).resolve().parents[2]


def fuzz(max_examples: int) -> settings:
    """Settings of every test here: derandomized, no database; the function-scoped tmp_path is
    fine (each example rewrites the same file)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


UNIT_STRINGS = [
    "1 GHz", "400 MHz", "64 KiB", "1.5 MiB", "19.2 GB/s", "4 pJ/bit", "1e3", "-1 ns", "0 B",
    "1e400 GB/s", "nan MHz", "inf KiB", "-inf", "5 furlongs", "12 kib", "1_000", "0x40",
    "\u00b5s", "10 \u00b5m2", "\u00e9\u00e8", "\x00", "", " ", "~", "null", "yes", "[1, 2]",
    "dram/ddr4_kv260.yaml", "../../etc/passwd", "nope.yaml",
]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(UNIT_STRINGS),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=12,
)


def _paths(doc, prefix=()):
    """Every (path, value) of a nested document, the root included."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, base):
    """``base`` (a parsed YAML document) with one to three random edits below its ``version``
    and ``kind``: a key deleted or renamed, a value replaced by a random one (a unit string, a
    huge number, NaN, a list...), wrapped in a list or a mapping; or, now and then, a random
    document instead."""
    doc = copy.deepcopy(base)
    if draw(st.integers(0, 19)) == 0:  # now and then a document of another shape altogether
        return draw(documents)
    for _ in range(draw(st.integers(1, 3))):
        # Edits deep in the document reach the checks behind the top-level ones.
        paths = [p for p, _ in _paths(doc) if p and p[0] not in ("version", "kind")]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "delete", "rename", "wrap", "nest"]))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        if op == "replace":
            parent[key] = draw(documents)
        elif op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = parent.pop(key)
        elif op == "wrap":
            parent[key] = [parent[key]]
        elif op == "nest":
            parent[key] = {draw(st.text(max_size=6)): parent[key]}
    return doc


def check(load) -> None:
    """The whole contract: a loaded object, or a CoaccelError of one line per problem."""
    try:
        load()
    except ConfigError as e:
        assert e.problems and all(isinstance(p, Problem) for p in e.problems)
        assert str(e).count("\n") == len(e.problems) - 1
    except CoaccelError as e:
        assert str(e), "an empty message"
    except Exception as e:  # noqa: BLE001 - the point of the test
        raise AssertionError(f"loader raised {type(e).__name__}: {e}") from e


def _dump(doc) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, RecursionError):
        return "{"


def _shipped(rel: str):
    return yaml.safe_load(arch_configs.path(rel).read_text())


# ---------------------------------------------------------------------------------------------
# Architecture configs of every shipped target

ARCHS = {
    "hbq_asic/hbq_e_28nm.yaml": _shipped("hbq_asic/hbq_e_28nm.yaml"),
    "deltallm_fpga/kv260.yaml": _shipped("deltallm_fpga/kv260.yaml"),
    "gpu/h200.yaml": _shipped("gpu/h200.yaml"),
}


@fuzz(40)
@given(data=st.data(), name=st.sampled_from(sorted(ARCHS)))
def test_mutated_architecture_configs(tmp_path, data, name):
    from coaccel.simulation import load_arch

    doc = data.draw(mutated(ARCHS[name]))
    path = tmp_path / Path(name).name
    path.write_text(_dump(doc), encoding="utf-8")
    check(lambda: load_arch(path))


@fuzz(40)
@given(raw=st.binary(max_size=200))
def test_random_bytes_as_architecture_file(tmp_path, raw):
    from coaccel.simulation import load_arch

    path = tmp_path / "arch.yaml"
    path.write_bytes(raw)
    check(lambda: load_arch(path))


# ---------------------------------------------------------------------------------------------
# Workload configs

WORKLOAD = _shipped("workloads/llama-3.2-1b.yaml")


@fuzz(80)
@given(data=st.data())
def test_mutated_workload_configs(tmp_path, data):
    from coaccel.spine.workload import load_workload

    doc = data.draw(mutated(WORKLOAD))
    path = tmp_path / "wl.yaml"
    path.write_text(_dump(doc), encoding="utf-8")
    check(lambda: load_workload(path))


@fuzz(40)
@given(text=st.text(max_size=120))
def test_random_workload_names_and_texts(tmp_path, text):
    from coaccel.spine.workload import load_workload

    check(lambda: load_workload(f"llama-3.2-1b:{text}"))
    path = tmp_path / "wl.yaml"
    path.write_text(text, encoding="utf-8")
    check(lambda: load_workload(path))


# ---------------------------------------------------------------------------------------------
# Sweep specs

SPEC = yaml.safe_load((ROOT / "arch_configs" / "sweeps" / "small_test.yaml").read_text())


@fuzz(60)
@given(data=st.data())
def test_mutated_sweep_specs(tmp_path, data):
    from coaccel.dse import load_spec

    doc = data.draw(mutated(SPEC))
    path = tmp_path / "spec.yaml"
    path.write_text(_dump(doc), encoding="utf-8")
    check(lambda: load_spec(path))


# ---------------------------------------------------------------------------------------------
# Trace files

KINDS = ("compute", "memory", "sparsity", "events")


def _sample_trace() -> Trace:
    b = TraceBuilder(producer="coaccel.models.gpu.fuzz", workload={"context": 4})
    b.allocate("K", space="HBM", nbytes=4096)
    with b.kernel("k", ctas=2, threads_per_cta=32) as kid:
        b.memory(kernel=kid, cta=0, space="HBM", rw="r", tensor="K", phase="load", addr=0,
                 nbytes=128)  # fmt: skip
        b.compute(kernel=kid, cta=1, unit="sm", op="gemm", m=1, n=8, k=128, macs=1024)
    return b.build()


SAMPLE = _sample_trace()


def _save_raw(path: Path, meta, arrays) -> None:
    with open(path, "wb") as f:
        np.savez(f, meta=np.asarray(meta), **arrays)


@fuzz(60)
@given(raw=st.binary(max_size=300), zip_head=st.booleans())
def test_random_bytes_as_trace(tmp_path, raw, zip_head):
    path = tmp_path / "t.npz"
    path.write_bytes((b"PK\x03\x04" if zip_head else b"") + raw)
    check(lambda: Trace.load(path))


@fuzz(80)
@given(data=st.data())
def test_mutated_trace_metadata(tmp_path, data):
    meta = data.draw(mutated(json.loads(json.dumps(SAMPLE.meta))))
    text = json.dumps(meta, allow_nan=True)
    if data.draw(st.booleans()):
        text = text[: data.draw(st.integers(0, len(text)))]  # cut short: not JSON
    path = tmp_path / "t.npz"
    _save_raw(path, text, {k: getattr(SAMPLE, k) for k in KINDS})
    check(lambda: Trace.load(path))


@fuzz(80)
@given(data=st.data(), kind=st.sampled_from(KINDS))
def test_mutated_trace_records(tmp_path, data, kind):
    arrays = {k: getattr(SAMPLE, k).copy() for k in KINDS}
    a = arrays[kind]
    op = data.draw(st.sampled_from(["field", "dtype", "shape", "drop", "extra"]))
    if op == "field" and a.size:
        field = data.draw(st.sampled_from(a.dtype.names))
        info = np.iinfo(a.dtype[field]) if a.dtype[field].kind in "iu" else None
        lo, hi = (int(info.min), int(info.max)) if info else (-(2**31), 2**31 - 1)
        a[field][data.draw(st.integers(0, a.size - 1))] = data.draw(st.integers(lo, hi))
    elif op == "dtype":
        arrays[kind] = data.draw(
            st.sampled_from([np.zeros(3, np.int64), np.zeros(2, np.float32), np.array(["x"])])
        )
    elif op == "shape":
        arrays[kind] = np.stack([a, a]) if a.size else a.reshape(0, 1)
    elif op == "drop":
        del arrays[kind]
    else:
        arrays["extra"] = np.arange(3)
    path = tmp_path / "t.npz"
    _save_raw(path, json.dumps(SAMPLE.meta), arrays)
    check(lambda: Trace.load(path))


def test_the_unmutated_samples_load(tmp_path):
    """The fuzzers start from inputs that load: their failures are the edits'."""
    from coaccel.dse import load_spec
    from coaccel.simulation import load_arch
    from coaccel.spine.workload import load_workload

    for name, doc in ARCHS.items():
        path = tmp_path / Path(name).name
        path.write_text(_dump(doc), encoding="utf-8")
        load_arch(path)
    path = tmp_path / "wl.yaml"
    path.write_text(_dump(WORKLOAD), encoding="utf-8")
    load_workload(path)
    path = tmp_path / "spec.yaml"
    path.write_text(_dump(SPEC), encoding="utf-8")
    load_spec(path)
    path = tmp_path / "t.npz"
    SAMPLE.save(path)
    assert Trace.load(path).equals(SAMPLE)


# ---------------------------------------------------------------------------------------------
# Workload strings and architecture overrides


def _string_workloads():
    from coaccel.spine.workload_string import Param, Size, StringWorkload

    def build(context: int, batch: int = 1, rate: float = 0.5, mode: str = "a", warm: bool = True):
        return (context, batch, rate, mode, warm)

    params = (
        Param("context", "tokens", lo=1, hi=2**24, unit="tokens", aliases=("T",)),
        Param("batch", "sequences", lo=1, hi=64, aliases=("B",)),
        Param("rate", "a share", kind="float", lo=0, hi=1),
        Param("mode", "the mode", kind="choice", choices=("alpha", "beta")),
        Param("warm", "warm up first", kind="flag"),
    )
    size = Size("tiles", lambda v: v["batch"] * v["context"], 2**20)
    return {"toy": StringWorkload("toy", build, params, sizes=(size,))}


STRING_WORKLOADS = _string_workloads()
string_items = st.one_of(
    st.text(max_size=12),
    st.builds(
        "{}={}".format,
        st.sampled_from(["T", "B", "context", "batch", "rate", "mode", "warm", "x", ""]),
        st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(UNIT_STRINGS),
                  st.floats().map(repr), st.text(max_size=6)),
    ),
)  # fmt: skip


@fuzz(200)
@given(name=st.sampled_from(["toy", "toy ", "", "t"]), items=st.lists(string_items, max_size=6))
def test_random_workload_strings(name, items):
    from coaccel.spine.workload_string import parse_workload_string

    text = f"{name}:{','.join(items)}"
    try:
        w, values = parse_workload_string(text, STRING_WORKLOADS)
    except ConfigError as e:
        assert e.problems and "\n" not in str(e.problems[0])
        return
    for p in w.params:  # whatever was accepted is within its declared bounds
        v = values.get(p.name)
        if v is not None and p.kind in ("int", "float"):
            assert p.lo <= v <= p.hi


@fuzz(100)
@given(overrides=st.one_of(documents, st.lists(st.one_of(st.text(max_size=15), scalars),
                                                max_size=4)))  # fmt: skip
def test_random_overrides(overrides):
    from coaccel.simulation import parse_overrides

    try:
        out = parse_overrides(overrides)
    except ConfigError as e:
        assert e.problems
        return
    assert isinstance(out, dict) and all(isinstance(k, str) for k in out)
