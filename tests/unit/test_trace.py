"""coaccel.trace: the record dtypes, builder (also with explicit seq numbers), save/load round
trip, version-1 upgrade, tensor map, validation, summaries, and storage_bytes."""

from __future__ import annotations

import json
import zipfile
from fractions import Fraction

import numpy as np
import pytest

from coaccel.spine.trace import (
    COMPUTE_DTYPE,
    EVENT_DTYPE,
    EVENT_KINDS,
    MEMORY_DTYPE,
    SPARSITY_DTYPE,
    SPARSITY_KIND_BITS,
    TRACE_VERSION,
    UNITS,
    Trace,
    TraceBuilder,
    TraceError,
    storage_bytes,
)

KINDS = ("compute", "memory", "sparsity", "events")

# The contract as docs/trace.md states it, written out independently of the module.
DOC_DTYPES = {
    "compute": [
        ("seq", "<i8"), ("kernel", "<i4"), ("cta", "<i4"), ("unit", "<i4"), ("op", "<i4"),
        ("m", "<i8"),
        ("n", "<i8"), ("k", "<i8"), ("macs", "<i8"), ("fmt_a", "<i4"), ("fmt_b", "<i4"),
        ("tile", "<i8"), ("dep", "<i8"), ("stream", "<i4"),
    ],
    "memory": [
        ("seq", "<i8"), ("kernel", "<i4"), ("cta", "<i4"), ("phase", "<i4"),
        ("tensor", "<i4"), ("space", "<i4"), ("rw", "|u1"), ("addr", "<i8"), ("nbytes", "<i8"),
        ("stride", "<i8"), ("count", "<i8"), ("dep", "<i8"), ("stream", "<i4"),
    ],
    "sparsity": [
        ("seq", "<i8"), ("kernel", "<i4"), ("layer", "<i4"), ("head", "<i4"),
        ("qblock", "<i4"), ("column", "<i8"), ("kind", "|u1"), ("nnz", "<i4"), ("lanes", "<u8"),
    ],
    "events": [
        ("seq", "<i8"), ("kind", "|u1"), ("kernel", "<i4"), ("name", "<i4"),
        ("stream", "<i4"), ("dep", "<i8"), ("ctas", "<i8"), ("threads_per_cta", "<i4"),
        ("smem_bytes_per_cta", "<i8"), ("regs_per_thread", "<i4"),
    ],
}  # fmt: skip

# Version 1 of the contract (docs/trace.md, "Versioning"), written out for the upgrade tests.
V1_DTYPES = {
    "compute": [
        ("seq", "<i8"), ("kernel", "<i4"), ("unit", "<i4"), ("op", "<i4"), ("m", "<i8"),
        ("n", "<i8"), ("k", "<i8"), ("macs", "<i8"), ("fmt_a", "<i4"), ("fmt_b", "<i4"),
        ("tile", "<i8"), ("dep", "<i8"), ("stream", "<i4"),
    ],
    "memory": DOC_DTYPES["memory"],
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
    assert sizes == [84, 73, 45, 53]
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
    b.allocate("Q", space="HBM", nbytes=256)
    b.allocate("K", space="HBM", nbytes=4096 + 15 * 2048 + 256)
    with b.kernel(
        "attn", stream=1, ctas=2, threads_per_cta=128, smem_bytes_per_cta=49152, regs_per_thread=96
    ) as kid:
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
            cta=1,
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
        kernel=kid,
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
    assert ev["threads_per_cta"].tolist() == [128, 0, 0, 0, 0]
    assert ev["smem_bytes_per_cta"][0] == 49152 and ev["regs_per_thread"][0] == 96
    assert t.compute["cta"].tolist() == [1, -1]  # -1: the default, no CTA
    assert t.sparsity["kernel"].tolist() == [0, 0]
    assert t.compute["macs"].tolist() == [4 * 16 * 128, 0]  # default m*n*k; exp has k=0
    assert t.memory["stride"].tolist() == [256, 2048, 64]  # default stride = nbytes
    assert t.sparsity["kind"].tolist() == [2 | 4, 1]
    assert t.sparsity["lanes"][0] == np.uint64(2**64 - 1)


def test_metadata():
    t = sample_trace()
    m = t.meta
    assert m["format"] == "coaccel.trace" and m["version"] == TRACE_VERSION == 2
    assert m["producer"] == "tests.trace" and m["seed"] == 7
    assert m["workload"] == {"model": "tiny", "T": 16, "shape": [2, 3]}  # JSON-normalized
    assert m["config_digest"] == "ab" * 32 and isinstance(m["coaccel_version"], str)
    assert m["units"]["memory.nbytes"] == "B" and m["units"]["compute.macs"] == "MAC"
    assert m["units"]["events.smem_bytes_per_cta"] == "B"
    assert m["tensors"] == {
        "Q": {"space": "HBM", "base_addr": 0, "nbytes": 256},
        "K": {"space": "HBM", "base_addr": 256, "nbytes": 35072},
    }
    # optional values, always present
    bare = TraceBuilder(producer="p").build().meta
    assert bare["config_digest"] is None and bare["seed"] is None and bare["tensors"] == {}


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
        (lambda b: b.event("kernel_end", threads_per_cta=32), "kernel_begin only"),
        (lambda b: b.event_many(kind=["record", "sync"], ctas=[0, 4]),
         "events.ctas: launch geometry is for kernel_begin only"),
        (lambda b: b.begin_kernel("k", smem_bytes_per_cta=-1),
         "events.smem_bytes_per_cta must be >= 0"),
        (lambda b: b.compute(op="gemm", cta=-2), "cta below -1"),
        (lambda b: b.compute_many(op="gemm", cta=[0, -2]), "cta below -1"),
        (lambda b: b.memory_many(seq=[0, 0], space="HBM", rw=0, nbytes=1),
         "seq not strictly increasing|used by more than one"),
        (lambda b: b.memory_many(seq=[-1], space="HBM", rw=0, nbytes=1), "seq numbers must be"),
        (lambda b: b.memory_many(seq=[[0, 1]], space="HBM", rw=0, nbytes=1),
         "seq must be a 1-D array"),
        (lambda b: b.memory_many(seq=[0, 1, 2], space="HBM", rw=0, nbytes=[1, 2]),
         "do not broadcast"),
        (lambda b: b.memory_many(seq=[4, 2], space="HBM", rw=0, nbytes=1, dep=[1, 2]),
         "dep not -1 or an earlier seq"),
        (lambda b: b.memory_many(space="", rw=0, nbytes=[1]), "no space"),
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
    with pytest.raises(TraceError, match="config_digest must be a non-empty string, or None"):
        TraceBuilder(producer="t", config_digest="")


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
        meta["version"] = 3

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

    def geometry_on_end(meta, arrays):
        arrays["events"]["regs_per_thread"][1] = 32

    def compute_cta(meta, arrays):
        arrays["compute"]["cta"][0] = -3

    def sparsity_orphan(meta, arrays):
        arrays["sparsity"]["kernel"][0] = 7

    def outside_tensor(meta, arrays):
        meta["tensors"]["K"]["nbytes"] = 35071

    def overlap(meta, arrays):
        meta["tensors"]["Q"]["nbytes"] = 257

    def tensor_keys(meta, arrays):
        meta["tensors"]["Q"]["size"] = 1

    def no_digest(meta, arrays):
        del meta["config_digest"]

    def empty_digest(meta, arrays):
        meta["config_digest"] = ""

    return {
        "dtype_int32": (dtype_int32, "memory: expected a 1-D array of dtype"),
        "big_endian": (big_endian, "compute: expected a 1-D array of dtype"),
        "version": (version, "unsupported trace version 3; this coaccel reads version 2"),
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
        "geometry_on_end": (geometry_on_end, "regs_per_thread set on an event other than"),
        "compute_cta": (compute_cta, "compute: 1 record\\(s\\) with cta below -1"),
        "sparsity_orphan": (sparsity_orphan, "name a kernel without a kernel_begin"),
        "outside_tensor": (
            outside_tensor,
            "record\\(s\\) of tensor 'K' in HBM reach outside its 35071 B allocation "
            "\\(first: index 1, seq 2, bytes \\[4096, 35072\\)\\)",
        ),
        "overlap": (overlap, "'Q' \\[0, 257\\) and 'K' \\[256, 35328\\) overlap in HBM"),
        "tensor_keys": (tensor_keys, "'Q' must have exactly the keys"),
        "no_digest": (no_digest, "'config_digest' is missing"),
        "empty_digest": (empty_digest, "'config_digest' must be a non-empty string or null"),
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
    with pytest.raises(TraceError, match="not a trace file: it is not an .npz archive"):
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
    with pytest.raises(TraceError, match="not a trace file: array .compute. holds Python objects"):
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
    assert c.meta["seed"] is None and c.meta["workload"] == {} and c.meta["config_digest"] is None
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


# ---------------------------------------------------------------------------------------------
# Explicit seq numbers


def _random_program(rng: np.random.Generator, n: int) -> list[tuple[str, dict]]:
    """n records in issue order: (kind, fields), names drawn so that first uses interleave."""
    spaces, tensors = np.array(["DRAM", "ACT", "PSUM"]), np.array(["x", "w", "y", "z"])
    ops, fmts = np.array(["gemm", "softmax"]), np.array(["e2m1", "hbq-e", "fp16"])
    prog = []
    for i in range(n):
        if rng.random() < 0.6:
            nb = int(rng.integers(0, 512))
            prog.append(("memory", dict(
                space=str(rng.choice(spaces)), rw=int(rng.integers(0, 2)),
                tensor=str(rng.choice(tensors)), nbytes=nb, addr=int(rng.integers(0, 1 << 20)),
                phase=str(rng.choice(["", "act", "wgt"])),
                dep=int(rng.integers(-1, i)) if i else -1,
            )))  # fmt: skip
        else:
            prog.append(("compute", dict(
                op=str(rng.choice(ops)), m=int(rng.integers(0, 9)), n=int(rng.integers(0, 9)),
                k=int(rng.integers(0, 9)), fmt_a=str(rng.choice(fmts)), fmt_b=str(rng.choice(fmts)),
                cta=int(rng.integers(-1, 4)), tile=i, dep=int(rng.integers(-1, i)) if i else -1,
            )))  # fmt: skip
    return prog


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_explicit_seqs_in_any_order_equal_adding_in_seq_order(seed):
    rng = np.random.default_rng(seed)
    prog = _random_program(rng, 300)
    single = TraceBuilder(producer="p", seed=seed)
    for kind, fields in prog:
        getattr(single, kind)(**fields)
    want = single.build()

    # The same records as columns of random groups of each kind, groups added in random order.
    bulk = TraceBuilder(producer="p", seed=seed)
    kinds = np.array([k for k, _ in prog])
    groups = rng.integers(0, 5, len(prog))
    order = [(k, g) for k in ("memory", "compute") for g in range(5)]
    for i in rng.permutation(len(order)).tolist():
        kind, g = order[i]
        idx = np.flatnonzero((kinds == kind) & (groups == g))
        idx = idx[rng.permutation(idx.size)]  # seqs need not increase within a group either
        if not idx.size:
            continue
        cols = {f: np.array([prog[j][1][f] for j in idx]) for f in prog[idx[0]][1]}
        got = getattr(bulk, f"{kind}_many")(seq=idx, **cols)
        assert got.tolist() == idx.tolist()
    assert bulk.n_records == len(prog) and bulk.next_seq == len(prog)
    got = bulk.build()
    assert got.equals(want)
    for name in ("space", "tensor", "phase", "op", "fmt"):
        assert got.table(name) == want.table(name)  # first-use order, as one by one
    # a record added later without a seq continues after the largest one
    assert bulk.memory(space="DRAM", rw=0, nbytes=1) == len(prog)
    again = bulk.build()
    assert again.memory["seq"][-1] == len(prog) and again.table("space") == want.table("space")


def test_explicit_seqs_with_gaps_and_clashes():
    b = TraceBuilder(producer="p")
    b.compute_many(seq=[10**9, 5], op="gemm")  # sparse: sorted, not counted
    b.memory_many(seq=[7], space="HBM", rw=0, nbytes=1, dep=5)
    t = b.build()
    assert t.compute["seq"].tolist() == [5, 10**9] and t.memory["dep"].tolist() == [5]
    assert b.next_seq == 10**9 + 1
    clash = TraceBuilder(producer="p")
    clash.compute_many(seq=[3, 1], op="gemm")
    clash.memory_many(seq=[0, 3], space="HBM", rw=0, nbytes=1)
    with pytest.raises(TraceError, match="seq 3 is used by more than one record"):
        clash.build()
    sparse = TraceBuilder(producer="p")
    sparse.compute_many(seq=[10**9, 2], op="gemm")
    sparse.memory_many(seq=[2], space="HBM", rw=0, nbytes=1)
    with pytest.raises(TraceError, match="not unique"):
        sparse.build()


def test_failed_adds_leave_no_names_behind():
    b = TraceBuilder(producer="p")
    with pytest.raises(TraceError):
        b.memory(space="HBM", rw=0, nbytes=-1, tensor="ghost")
    with pytest.raises(TraceError):
        b.memory_many(space="L2", rw=0, nbytes=[1, -1], tensor=np.array(["g1", "g2"]))
    b.memory_many(space="SMEM", rw=0, nbytes=np.zeros(0, dtype=np.int64), tensor="empty")
    b.memory(space="HBM", rw=0, nbytes=4, tensor="real")
    t = b.build()
    assert t.table("space") == ("", "HBM") and t.table("tensor") == ("", "real")


# ---------------------------------------------------------------------------------------------
# Tensor map


def test_allocate_places_tensors_and_checks_them():
    b = TraceBuilder(producer="p")
    assert b.allocate("K", space="HBM", nbytes=1000) == 0
    assert b.allocate("V", space="HBM", nbytes=10) == 1024  # after K, 256-aligned
    assert b.allocate("x", space="HOST", nbytes=8, align_bytes=4096) == 0  # per space
    assert b.allocate("Q", space="HBM", nbytes=24, base_addr=1040) == 1040
    with pytest.raises(TraceError, match="'K' is already allocated"):
        b.allocate("K", space="HBM", nbytes=1)
    with pytest.raises(TraceError, match="'V' \\[1024, 1034\\) and 'W' \\[1030, 1031\\) overlap"):
        b.allocate("W", space="HBM", nbytes=1, base_addr=1030)
    with pytest.raises(TraceError, match="nbytes must be an integer >= 0"):
        b.allocate("W", space="HBM", nbytes=-1)
    with pytest.raises(TraceError, match="align_bytes must be a positive integer"):
        b.allocate("W", space="HBM", nbytes=1, align_bytes=0)
    # strided runs are checked by their first and last row; other spaces are not the tensor's
    b.memory(space="HBM", rw=0, tensor="K", addr=100, nbytes=100, stride=200, count=5)  # ..1000
    b.memory(space="SMEM", rw=1, tensor="K", addr=5000, nbytes=64)  # an on-chip copy
    b.memory(space="HBM", rw=0, tensor="V", addr=0, nbytes=0, count=3)  # moves nothing
    t = b.build()
    assert t.meta["tensors"]["V"] == {"space": "HBM", "base_addr": 1024, "nbytes": 10}
    b.memory(space="HBM", rw=0, tensor="K", addr=100, nbytes=101, stride=200, count=5)
    with pytest.raises(TraceError, match="reach outside its 1000 B allocation"):
        b.build()


def test_concat_merges_tensor_maps_and_shifts_sparsity_kernels():
    a = sample_trace()
    c = a.concat(a)
    assert c.meta["tensors"] == a.meta["tensors"]
    assert c.sparsity["kernel"].tolist() == [0, 0, 1, 1]  # the second copy's kernel is 1
    b = TraceBuilder(producer="q")
    b.allocate("K", space="HBM", nbytes=64)
    with pytest.raises(TraceError, match="tensor 'K' is placed differently"):
        a.concat(b.build())


# ---------------------------------------------------------------------------------------------
# Version 1 files


def write_v1(path, *, config_digest="", units=None):
    """A version-1 trace file, laid out as version 1 wrote it (docs/trace.md, Versioning)."""
    compute = np.zeros(2, dtype=V1_DTYPES["compute"])
    compute["seq"], compute["op"], compute["m"], compute["macs"] = [1, 3], [1, 1], [4, 5], [8, 9]
    compute["dep"], compute["tile"], compute["stream"] = [0, -1], [-1, 7], [0, 2]
    memory = np.zeros(1, dtype=V1_DTYPES["memory"])
    memory["seq"], memory["space"], memory["nbytes"], memory["count"] = [0], [1], [64], [1]
    memory["stride"], memory["cta"], memory["dep"] = [64], [3], [-1]
    sparsity = np.zeros(1, dtype=V1_DTYPES["sparsity"])
    sparsity["seq"], sparsity["kind"], sparsity["lanes"], sparsity["column"] = [2], [6], [5], [9]
    events = np.zeros(2, dtype=V1_DTYPES["events"])
    events["seq"], events["kind"], events["ctas"], events["name"] = [4, 5], [0, 1], [16, 0], [1, 1]
    events["dep"] = -1
    v1_units = {k: u for k, u in UNITS.items() if k.split(".")[1] not in (
        "threads_per_cta", "smem_bytes_per_cta", "regs_per_thread")}  # fmt: skip
    meta = {
        "format": "coaccel.trace", "version": 1, "coaccel_version": "0.1.0",
        "producer": "old.tool", "workload": {"T": 4}, "config_digest": config_digest,
        "seed": 3, "units": v1_units if units is None else units,
        "tables": {"unit": [""], "op": ["", "gemm"], "fmt": [""], "phase": [""],
                   "tensor": [""], "space": ["", "HBM"], "kernel_name": ["", "attn"]},
    }  # fmt: skip
    write_npz(path, meta, {"compute": compute, "memory": memory, "sparsity": sparsity,
                           "events": events})  # fmt: skip
    return compute, memory, sparsity, events, meta


def test_version_1_files_load_upgraded(tmp_path):
    p = tmp_path / "v1.npz"
    compute, memory, sparsity, events, meta = write_v1(p)
    t = Trace.load(p)
    assert t.meta["version"] == 2 and t.meta["tensors"] == {}
    assert t.meta["config_digest"] is None  # version 1 wrote "" for none
    assert t.meta["units"] == dict(UNITS)  # the new columns' units added
    for key in ("producer", "workload", "seed", "tables", "coaccel_version"):
        assert t.meta[key] == meta[key]
    for kind, old in (("compute", compute), ("memory", memory), ("sparsity", sparsity),
                      ("events", events)):  # fmt: skip
        new = getattr(t, kind)
        assert new.dtype == np.dtype(DOC_DTYPES[kind])
        for name in old.dtype.names:  # every version-1 value kept
            assert new[name].tolist() == old[name].tolist(), (kind, name)
    assert t.compute["cta"].tolist() == [-1, -1]
    assert t.sparsity["kernel"].tolist() == [0]
    for f in ("threads_per_cta", "smem_bytes_per_cta", "regs_per_thread"):
        assert t.events[f].tolist() == [0, 0]
    # saved again it is a version-2 file that round-trips exactly
    t.save(tmp_path / "v2.npz")
    assert Trace.load(tmp_path / "v2.npz").equals(t)
    write_v1(tmp_path / "d.npz", config_digest="ab" * 32)
    assert Trace.load(tmp_path / "d.npz").meta["config_digest"] == "ab" * 32


def test_version_1_files_with_version_2_layout_are_rejected(tmp_path):
    p = tmp_path / "v1.npz"
    *_, meta = write_v1(p)
    meta["version"] = 1
    arrays = {k: getattr(sample_trace(), k).copy() for k in KINDS}
    write_npz(p, meta, arrays)
    with pytest.raises(TraceError, match="compute: expected a 1-D array of the version-1 dtype"):
        Trace.load(p)


# ---------------------------------------------------------------------------------------------
# storage_bytes


def test_storage_bytes_against_fraction_arithmetic():
    bits = [Fraction(1), Fraction(33, 8), Fraction(17, 4), Fraction(9, 2), Fraction(136, 16),
            Fraction(41, 8), 16, 32, Fraction(1, 3)]  # fmt: skip
    elems = np.arange(0, 2000, dtype=np.int64)
    for b in bits:
        want = [-(-Fraction(e) * Fraction(b) // 8) for e in range(2000)]
        got = storage_bytes(elems, b)
        assert got.dtype == np.int64 and got.tolist() == [int(w) for w in want], b
        assert storage_bytes(1999, b) == int(want[-1])  # scalar: a Python int
        assert isinstance(storage_bytes(np.int32(1999), b), int)
    grid = storage_bytes(np.arange(6).reshape(2, 3), Fraction(33, 8))
    assert grid.shape == (2, 3) and grid.tolist() == [[0, 1, 2], [2, 3, 3]]


@pytest.mark.parametrize(
    ("elems", "bits", "match"),
    [
        (4, Fraction(0), "must be positive"),
        (4, 4.5, "int or Fraction"),
        (-1, 4, "elems must be >= 0"),
        (np.array([1, -1]), 4, "elems must be >= 0"),
        (np.array([1.0]), 4, "elems must be integers"),
        (np.array([2**62]), 16, "overflows int64"),
    ],
)
def test_storage_bytes_rejects_bad_input(elems, bits, match):
    with pytest.raises(TraceError, match=match):
        storage_bytes(elems, bits)
