"""coaccel.trace: the record dtypes, builder, save/load round trip, validation, summaries."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from coaccel.trace import (
    COMPUTE_DTYPE,
    EVENT_DTYPE,
    EVENT_KINDS,
    MEMORY_DTYPE,
    SPARSITY_DTYPE,
    SPARSITY_KIND_BITS,
    TRACE_VERSION,
    Trace,
    TraceBuilder,
    TraceError,
)

KINDS = ("compute", "memory", "sparsity", "events")

# The contract as docs/trace.md states it, written out independently of the module.
DOC_DTYPES = {
    "compute": [
        ("seq", "<i8"), ("kernel", "<i4"), ("unit", "<i4"), ("op", "<i4"), ("m", "<i8"),
        ("n", "<i8"), ("k", "<i8"), ("macs", "<i8"), ("fmt_a", "<i4"), ("fmt_b", "<i4"),
        ("tile", "<i8"), ("dep", "<i8"), ("stream", "<i4"),
    ],
    "memory": [
        ("seq", "<i8"), ("kernel", "<i4"), ("cta", "<i4"), ("phase", "<i4"),
        ("tensor", "<i4"), ("space", "<i4"), ("rw", "|u1"), ("addr", "<i8"), ("nbytes", "<i8"),
        ("stride", "<i8"), ("count", "<i8"), ("dep", "<i8"), ("stream", "<i4"),
    ],
    "sparsity": [
        ("seq", "<i8"), ("layer", "<i4"), ("head", "<i4"), ("qblock", "<i4"),
        ("column", "<i8"), ("kind", "|u1"), ("nnz", "<i4"), ("lanes", "<u8"),
    ],
    "events": [
        ("seq", "<i8"), ("kind", "|u1"), ("kernel", "<i4"), ("name", "<i4"),
        ("stream", "<i4"), ("dep", "<i8"), ("ctas", "<i8"),
    ],
}  # fmt: skip


def test_dtypes_are_the_documented_contract():
    for kind, dt in zip(
        KINDS, (COMPUTE_DTYPE, MEMORY_DTYPE, SPARSITY_DTYPE, EVENT_DTYPE), strict=True
    ):
        assert dt == np.dtype(DOC_DTYPES[kind]), kind
        assert dt.itemsize == sum(np.dtype(f).itemsize for _, f in DOC_DTYPES[kind])  # packed
    # record sizes in docs/trace.md, summed by hand from the field widths
    sizes = [dt.itemsize for dt in (COMPUTE_DTYPE, MEMORY_DTYPE, SPARSITY_DTYPE, EVENT_DTYPE)]
    assert sizes == [80, 73, 41, 37]
    assert EVENT_KINDS == ("kernel_begin", "kernel_end", "record", "wait", "sync")
    assert dict(SPARSITY_KIND_BITS) == {"exact": 1, "delta": 2, "mixed": 3, "skipped": 4}


def sample_trace(seed: int = 7) -> Trace:
    """A small trace with every record kind and every table."""
    b = TraceBuilder(
        producer="tests.trace",
        workload={"model": "tiny", "T": 16, "shape": (2, 3)},
        config_digest="ab" * 32,
        seed=seed,
    )
    with b.kernel("attn", stream=1, ctas=2) as kid:
        s_q = b.memory(
            space="HBM", rw="r", nbytes=256, tensor="Q", kernel=kid, cta=0, phase="load_q", stream=1
        )
        b.memory(
            space="HBM",
            rw="read",
            nbytes=256,
            count=16,
            stride=2048,
            addr=4096,
            tensor="K",
            kernel=kid,
            cta=1,
            phase="scan",
            stream=1,
            dep=s_q,
        )
        b.compute(
            op="gemm",
            m=4,
            n=16,
            k=128,
            fmt_a="bf16",
            fmt_b="bf16",
            unit="tensor_core",
            kernel=kid,
            tile=0,
            dep=s_q,
            stream=1,
        )
        b.compute(op="exp", m=4, n=16, kernel=kid, unit="sfu", stream=1)
        b.memory(space="SMEM", rw="w", nbytes=64, tensor="O", kernel=kid, stream=1)
    rec = b.event("record", stream=1)
    b.event("wait", stream=0, dep=rec)
    b.sparsity(
        layer=0,
        head=1,
        qblock=2,
        column=3,
        kind="delta+skipped",
        nnz=5,
        lanes=0xFFFF_FFFF_FFFF_FFFF,
    )
    b.sparsity(layer=0, head=1, qblock=2, column=4, kind="exact", lanes=0b1011)
    b.event("sync")
    return b.build()  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Builder basics


def test_seq_and_tables():
    t = sample_trace()
    seqs = np.sort(np.concatenate([getattr(t, k)["seq"] for k in KINDS]))
    assert np.array_equal(seqs, np.arange(12))  # 12 records, numbered in issue order
    assert t.table("space") == ("", "HBM", "SMEM")
    assert t.table("tensor") == ("", "Q", "K", "O")
    assert t.table("op") == ("", "gemm", "exp")
    assert t.table("fmt") == ("", "bf16")
    assert t.table("kernel_name") == ("", "attn")
    assert list(t.decode("memory", "phase")) == ["load_q", "scan", ""]
    ev = t.events
    assert [EVENT_KINDS[k] for k in ev["kind"]] == [
        "kernel_begin", "kernel_end", "record", "wait", "sync",
    ]  # fmt: skip
    assert ev["ctas"][0] == 2 and ev["stream"][0] == 1 and ev["dep"][3] == ev["seq"][2]
    assert t.compute["macs"].tolist() == [4 * 16 * 128, 0]  # default m*n*k; exp has k=0
    assert t.memory["stride"].tolist() == [256, 2048, 64]  # default stride = nbytes
    assert t.sparsity["kind"].tolist() == [2 | 4, 1]
    assert t.sparsity["lanes"][0] == np.uint64(2**64 - 1)


def test_metadata():
    t = sample_trace()
    m = t.meta
    assert m["format"] == "coaccel.trace" and m["version"] == TRACE_VERSION == 1
    assert m["producer"] == "tests.trace" and m["seed"] == 7
    assert m["workload"] == {"model": "tiny", "T": 16, "shape": [2, 3]}  # JSON-normalized
    assert m["config_digest"] == "ab" * 32 and isinstance(m["coaccel_version"], str)
    assert m["units"]["memory.nbytes"] == "B" and m["units"]["compute.macs"] == "MAC"


def test_arrays_are_read_only():
    t = sample_trace()
    for k in KINDS:
        with pytest.raises(ValueError):
            getattr(t, k)["seq"][:1] = 99


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda b: b.memory(space="HBM", rw="r", nbytes=-1), "memory.nbytes must be >= 0"),
        (lambda b: b.memory(space="HBM", rw=2, nbytes=1), "rw must be"),
        (lambda b: b.memory(space="", rw=0, nbytes=1), "need a space"),
        (lambda b: b.memory(space="HBM", rw=0, nbytes=1.5), "memory.nbytes must be an integer"),
        (lambda b: b.memory(space="HBM", rw=0, nbytes=1, dep=0), "dep must be -1 or the seq"),
        (lambda b: b.memory(space="HBM", rw=0, nbytes=1, cta=2**31), "does not fit int32"),
        (lambda b: b.memory(space=3, rw=0, nbytes=1), "takes a name"),
        (lambda b: b.compute(op=""), "need an op"),
        (lambda b: b.compute(op="gemm", m=-1), "compute.m must be >= 0"),
        (lambda b: b.sparsity(layer=0, head=0, qblock=0, column=0, kind="skipped", lanes=1),
         "must include 'exact' and/or 'delta'"),
        (lambda b: b.sparsity(layer=0, head=0, qblock=0, column=0, kind="dense", lanes=1),
         "unknown sparsity kind 'dense'"),
        (lambda b: b.sparsity(layer=0, head=0, qblock=0, column=0, kind=1, lanes=2**64),
         "does not fit uint64"),
        (lambda b: b.event("launch"), "unknown event kind 'launch'"),
        (lambda b: b.memory_many(space="HBM", rw=0, nbytes=[1.0, 2.0]), "expected integers"),
        (lambda b: b.memory_many(space="HBM", rw=0, nbytes=[1, -2]), "negative nbytes"),
        (lambda b: b.memory_many(space="HBM", rw=[0, 2], nbytes=1), "rw must be"),
        (lambda b: b.memory_many(space="HBM", rw=0), "missing column"),
        (lambda b: b.memory_many(space="HBM", rw=0, nbytes=1, size=3), "unknown column"),
        (lambda b: b.memory_many(space="HBM", rw=0, nbytes=[1, 2], addr=[1, 2, 3]),
         "do not broadcast"),
        (lambda b: b.memory_many(space=[1, 2], rw=0, nbytes=1), "names must be strings"),
        (lambda b: b.memory_many(space="HBM", rw=0, nbytes=1, dep=[5]), "dep not -1"),
        (lambda b: b.compute_many(op="gemm", m=np.array([2**40]), n=1, k=1, kernel=2**40),
         "outside the range"),
    ],
)  # fmt: skip
def test_builder_rejects_bad_records(call, match):
    b = TraceBuilder(producer="t")
    with pytest.raises(TraceError, match=match):
        call(b)


def test_builder_rejects_bad_metadata():
    with pytest.raises(TraceError, match="JSON"):
        TraceBuilder(producer="t", workload={"x": object()})
    with pytest.raises(TraceError, match="JSON"):
        TraceBuilder(producer="t", workload={"x": float("nan")})
    with pytest.raises(TraceError, match="producer"):
        TraceBuilder(producer="")
    with pytest.raises(TraceError, match="seed"):
        TraceBuilder(producer="t", seed=1.5)


# ---------------------------------------------------------------------------------------------
# Bulk == single


def test_bulk_equals_single_records():
    rng = np.random.default_rng(1)
    n = 200
    spaces = rng.choice(np.array(["DRAM", "ACT", "PSUM", "WGT"]), n)
    tensors = rng.choice(np.array(["x", "w", "y"]), n)
    rw = rng.integers(0, 2, n)
    nbytes = rng.integers(0, 4096, n)
    count = rng.integers(1, 9, n)
    addr = rng.integers(0, 2**40, n)
    m, nn, k = (rng.integers(0, 64, n) for _ in range(3))
    cols = rng.integers(0, 1024, n)
    kinds = rng.integers(1, 8, n)
    kinds[kinds == 4] = 5
    lanes = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)

    single = TraceBuilder(producer="p", seed=1)
    for i in range(n):
        single.memory(
            space=str(spaces[i]),
            rw=int(rw[i]),
            nbytes=int(nbytes[i]),
            count=int(count[i]),
            addr=int(addr[i]),
            tensor=str(tensors[i]),
            stream=2,
        )
    for i in range(n):
        single.compute(
            op="gemm", m=int(m[i]), n=int(nn[i]), k=int(k[i]), fmt_a="e2m1", tile=i, dep=i
        )
    for i in range(n):
        single.sparsity(
            layer=1,
            head=2,
            qblock=3,
            column=int(cols[i]),
            kind=int(kinds[i]),
            nnz=int(cols[i] % 7),
            lanes=int(lanes[i]),
        )

    bulk = TraceBuilder(producer="p", seed=1)
    bulk.memory_many(
        space=spaces,
        rw=np.where(rw == 1, "w", "r"),
        nbytes=nbytes,
        count=count,
        addr=addr,
        tensor=tensors,
        stream=2,
    )
    bulk.compute_many(op="gemm", m=m, n=nn, k=k, fmt_a="e2m1", tile=np.arange(n), dep=np.arange(n))
    bulk.sparsity_many(
        layer=1, head=2, qblock=3, column=cols, kind=kinds, nnz=cols % 7, lanes=lanes
    )
    a, b = single.build(), bulk.build()
    assert a.equals(b)
    for kind in KINDS:
        assert getattr(a, kind).tobytes() == getattr(b, kind).tobytes()
    # the default macs = m*n*k, computed independently
    assert np.array_equal(b.compute["macs"], m * nn * k)  # fmt: skip


def test_bulk_kind_names_and_interleaving():
    b = TraceBuilder(producer="p")
    s0 = b.memory(space="DRAM", rw=0, nbytes=8)
    seqs = b.sparsity_many(
        layer=0,
        head=0,
        qblock=0,
        column=[0, 1, 2],
        kind=["exact", "mixed+skipped", "delta"],
        lanes=1,
    )
    s4 = b.event_many(kind=["record", "sync"])
    s6 = b.memory(space="DRAM", rw=1, nbytes=8, dep=int(seqs[1]))
    t = b.build()
    assert s0 == 0 and seqs.tolist() == [1, 2, 3] and s4.tolist() == [4, 5] and s6 == 6
    assert t.sparsity["kind"].tolist() == [1, 7, 2]
    assert t.memory["seq"].tolist() == [0, 6] and t.memory["dep"].tolist() == [-1, 2]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Summaries, against hand counts


def test_summaries_match_hand_counts():
    t = sample_trace()
    # HBM reads: Q 256 B + K 16 rows x 256 B = 4352; SMEM write: 64
    assert t.total_bytes() == 256 + 16 * 256 + 64
    assert t.total_bytes(space="HBM") == 4352
    assert t.total_bytes(space="HBM", rw="w") == 0
    assert t.total_bytes(space=["HBM", "SMEM"], rw=1) == 64
    assert t.total_bytes(tensor="K") == 4096
    assert t.total_bytes(space="HOST") == 0  # a space no record uses
    assert t.total_macs() == 4 * 16 * 128
    assert t.total_macs(op="exp") == 0
    assert t.summary() == {
        "n_compute": 2,
        "n_memory": 3,
        "n_sparsity": 2,
        "n_events": 5,
        "macs": 8192,
        "bytes": {"HBM.read": 4352, "SMEM.write": 64},
    }


def test_summaries_on_random_records_vs_a_python_loop():
    rng = np.random.default_rng(5)
    n = 500
    sp = rng.choice(np.array(["DRAM", "ACT", "PSUM"]), n)
    rw = rng.integers(0, 2, n)
    nb = rng.integers(0, 10_000, n)
    cnt = rng.integers(0, 50, n)
    b = TraceBuilder(producer="p")
    b.memory_many(space=sp, rw=rw, nbytes=nb, count=cnt)
    t = b.build()
    for space in ("DRAM", "ACT", "PSUM"):
        for r in (0, 1):
            expect = sum(
                int(nb[i]) * int(cnt[i]) for i in range(n) if sp[i] == space and rw[i] == r
            )
            assert t.total_bytes(space=space, rw=r) == expect
            assert t.summary()["bytes"].get(f"{space}.{'write' if r else 'read'}", 0) == expect


# ---------------------------------------------------------------------------------------------
# Save / load


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_is_bit_identical(tmp_path, compress):
    t = sample_trace()
    p = tmp_path / "trace.bin"  # any name: nothing is appended
    t.save(p, compress=compress)
    assert p.is_file() and not (tmp_path / "trace.bin.npz").exists()
    u = Trace.load(p)
    assert u.meta == t.meta
    for k in KINDS:
        a, b = getattr(t, k), getattr(u, k)
        assert a.dtype == b.dtype and np.array_equal(a, b) and a.tobytes() == b.tobytes()
    assert u.equals(t)
    with np.load(p, allow_pickle=False) as z:
        assert json.loads(str(z["meta"])) == t.meta


def test_empty_trace_round_trips(tmp_path):
    t = TraceBuilder(producer="p").build()
    t.save(tmp_path / "e.npz")
    u = Trace.load(tmp_path / "e.npz")
    assert u.equals(t) and all(getattr(u, k).size == 0 for k in KINDS)
    assert t.total_bytes() == 0 and t.total_macs() == 0


def write_npz(path, meta, arrays):
    with open(path, "wb") as f:
        np.savez(f, meta=np.asarray(json.dumps(meta)), **arrays)


def parts_of(t):
    return dict(t.meta), {k: getattr(t, k).copy() for k in KINDS}


def retype(a: np.ndarray, field: str, fmt: str) -> np.ndarray:
    dt = np.dtype([(n, fmt if n == field else a.dtype[n]) for n in a.dtype.names])
    out = np.zeros(a.shape, dt)
    for n in a.dtype.names:
        out[n] = a[n]
    return out


def tamper_cases():
    def dtype_int32(meta, arrays):
        arrays["memory"] = retype(arrays["memory"], "nbytes", "<i4")

    def big_endian(meta, arrays):
        arrays["compute"] = arrays["compute"].astype(COMPUTE_DTYPE.newbyteorder(">"))

    def version(meta, arrays):
        meta["version"] = 2

    def fmt(meta, arrays):
        meta["format"] = "something.else"

    def missing(meta, arrays):
        del arrays["events"]

    def extra(meta, arrays):
        arrays["extra"] = np.zeros(3)

    def table_index(meta, arrays):
        arrays["memory"]["space"][0] = 9

    def dup_seq(meta, arrays):
        arrays["sparsity"]["seq"][0] = arrays["compute"]["seq"][0]

    def dep_forward(meta, arrays):
        arrays["memory"]["dep"][0] = 999

    def rw_value(meta, arrays):
        arrays["memory"]["rw"][1] = 3

    def no_table(meta, arrays):
        del meta["tables"]["space"]

    def table_no_blank(meta, arrays):
        meta["tables"]["op"] = ["gemm", "exp", "x"]

    def two_d(meta, arrays):
        arrays["events"] = arrays["events"].reshape(1, -1)

    def sparsity_kind(meta, arrays):
        arrays["sparsity"]["kind"][1] = 4

    return {
        "dtype_int32": (dtype_int32, "memory: expected a 1-D array of dtype"),
        "big_endian": (big_endian, "compute: expected a 1-D array of dtype"),
        "version": (version, "unsupported trace version 2; this coaccel reads version 1"),
        "format": (fmt, "metadata format is 'something.else'"),
        "missing": (missing, "expected \\['compute', 'events', 'memory', 'meta', 'sparsity'\\]"),
        "extra": (extra, "arrays \\['compute', 'events', 'extra'"),
        "table_index": (table_index, "memory: 1 record\\(s\\) with space outside its table"),
        "dup_seq": (dup_seq, "not unique"),
        "dep_forward": (dep_forward, "dep not -1 or an earlier seq"),
        "rw_value": (rw_value, "rw not 0 \\(read\\) or 1 \\(write\\)"),
        "no_table": (no_table, "metadata tables must be exactly"),
        "table_no_blank": (table_no_blank, "table 'op' must start with ''"),
        "two_d": (two_d, "events: expected a 1-D array"),
        "sparsity_kind": (sparsity_kind, "kind not a valid bit set"),
    }


@pytest.mark.parametrize("case", sorted(tamper_cases()))
def test_tampered_files_raise_trace_error(tmp_path, case):
    change, match = tamper_cases()[case]
    meta, arrays = parts_of(sample_trace())
    meta = json.loads(json.dumps(meta))
    change(meta, arrays)
    p = tmp_path / "t.npz"
    write_npz(p, meta, arrays)
    with pytest.raises(TraceError, match=match) as e:
        Trace.load(p)
    assert str(e.value).startswith(f"{p}: ")
    assert isinstance(e.value, ValueError)


def test_unreadable_files_raise_trace_error(tmp_path):
    t = sample_trace()
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"this is not a zip file at all")
    with pytest.raises(TraceError, match="not a readable trace file"):
        Trace.load(garbage)
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(3))
    with pytest.raises(TraceError, match="not an .npz archive"):
        Trace.load(npy)
    pickled = tmp_path / "p.npz"
    meta, arrays = parts_of(t)
    arrays["compute"] = np.array([object()], dtype=object)
    with open(pickled, "wb") as f:
        np.savez(f, meta=np.asarray(json.dumps(meta)), **arrays)
    with pytest.raises(TraceError, match="not a readable trace file"):
        Trace.load(pickled)
    badjson = tmp_path / "j.npz"
    with open(badjson, "wb") as f:
        np.savez(f, meta=np.asarray("{not json"), **parts_of(t)[1])
    with pytest.raises(TraceError, match="metadata is not valid JSON"):
        Trace.load(badjson)
    nonstr = tmp_path / "n.npz"
    with open(nonstr, "wb") as f:
        np.savez(f, meta=np.zeros(2), **parts_of(t)[1])
    with pytest.raises(TraceError, match="'meta' must be a 0-d unicode array"):
        Trace.load(nonstr)
    truncated = tmp_path / "t.npz"
    t.save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(TraceError):
        Trace.load(truncated)
    with pytest.raises(FileNotFoundError):
        Trace.load(tmp_path / "missing.npz")
    assert zipfile.is_zipfile(tmp_path / "j.npz")


def test_constructor_validates_directly_built_traces():
    meta, arrays = parts_of(sample_trace())
    arrays["memory"]["nbytes"][0] = -5
    with pytest.raises(TraceError, match="negative nbytes"):
        Trace(meta, **arrays)


# ---------------------------------------------------------------------------------------------
# concat


def test_concat_shifts_and_remaps():
    a = sample_trace()
    b2 = TraceBuilder(producer="other", workload={"layer": 1}, seed=9)
    with b2.kernel("mlp") as kid:
        s = b2.memory(space="DRAM", rw="r", nbytes=32, tensor="K", kernel=kid)
        b2.memory(space="HBM", rw="w", nbytes=16, tensor="W", kernel=kid, dep=s)
        b2.compute(op="exp", m=2, n=2, kernel=kid, dep=s)
    b = b2.build()
    c = a.concat(b)
    n_a = 12
    assert c.memory.size == 5 and c.compute.size == 3 and c.events.size == 7
    # seq and dep shifted by the first trace's length
    assert c.memory["seq"][3:].tolist() == (b.memory["seq"] + n_a).tolist()
    assert c.memory["dep"][3:].tolist() == [-1, int(b.memory["seq"][0]) + n_a]
    # kernel ids shifted past the first trace's (it used kernel 0)
    assert c.memory["kernel"][3:].tolist() == [1, 1]
    # names survive the remapping; existing names keep their indices
    assert c.decode("memory", "space").tolist() == ["HBM", "HBM", "SMEM", "DRAM", "HBM"]
    assert c.decode("memory", "tensor").tolist() == ["Q", "K", "O", "K", "W"]
    assert c.table("space")[:3] == a.table("space")
    assert c.decode("compute", "op").tolist() == ["gemm", "exp", "exp"]
    assert c.total_bytes() == a.total_bytes() + b.total_bytes()
    assert c.total_macs() == a.total_macs() + b.total_macs()
    # differing identity fields become neutral; the parts keep them
    assert c.meta["producer"] == "tests.trace+other"
    assert c.meta["seed"] is None and c.meta["workload"] == {} and c.meta["config_digest"] == ""
    assert [p["producer"] for p in c.meta["parts"]] == ["tests.trace", "other"]
    assert [p["seq_offset"] for p in c.meta["parts"]] == [0, n_a]
    assert [p["kernel_offset"] for p in c.meta["parts"]] == [0, 1]


def test_concat_of_equal_producers_keeps_metadata_and_nests(tmp_path):
    a = sample_trace()
    c = a.concat(a).concat(a)
    for key in ("producer", "workload", "config_digest", "seed"):
        assert c.meta[key] == a.meta[key]
    assert [p["seq_offset"] for p in c.meta["parts"]] == [0, 12, 24]
    assert c.total_macs() == 3 * a.total_macs()
    c.save(tmp_path / "c.npz")
    assert Trace.load(tmp_path / "c.npz").equals(c)
