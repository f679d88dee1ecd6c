"""Delta-Key encoder of the DeltaLLM reference against element-by-element oracles."""

import numpy as np
import pytest

from coaccel.models import deltallm as dl


def _walk_keys(rng, h=2, t=40, d=12, step=6):
    """int8 keys that drift like post-RoPE keys of neighbouring tokens."""
    walk = np.cumsum(rng.integers(-step, step + 1, size=(h, t, d)), axis=1)
    return np.clip(walk + rng.integers(-40, 41, size=(h, 1, d)), -127, 127).astype(np.int8)


def _oracle(keys, theta, mode="memory", refresh=0, n_sink=1):
    """Scalar Python delta encoder: returns deltas, mask, reconstruction as nested int lists."""
    h_n, t_n, d_n = keys.shape
    out_d = np.zeros(keys.shape, dtype=np.int64)
    out_m = np.zeros(keys.shape, dtype=bool)
    out_r = np.zeros(keys.shape, dtype=np.int64)
    for h in range(h_n):
        for c in range(d_n):
            mem, prev = 0, 0
            for t in range(t_n):
                x = int(keys[h, t, c])
                dense = t < n_sink or (refresh > 0 and t % refresh == 0)
                if dense:
                    delta, kept = x - mem, True
                else:
                    e = x - mem if mode == "memory" else x - prev
                    kept = abs(e) >= theta
                    delta = e if kept else 0
                mem += delta
                prev = x
                out_d[h, t, c], out_m[h, t, c], out_r[h, t, c] = delta, kept, mem
    return out_d, out_m, out_r


@pytest.mark.parametrize("theta", [0, 1, 2, 5, 9])
@pytest.mark.parametrize("mode", ["memory", "naive"])
def test_encoder_matches_oracle(theta, mode):
    keys = _walk_keys(np.random.default_rng(theta + 7))
    dk = dl.encode_delta_keys(keys, theta=theta, delta_mode=mode)
    want_d, want_m, want_r = _oracle(keys, theta, mode)
    assert np.array_equal(dk.mask, want_m)
    assert np.array_equal(dk.deltas, want_d)
    assert np.array_equal(dk.keys_hat, want_r)
    assert np.array_equal(dk.memory, want_r[:, -1])
    assert np.array_equal(dk.prev_key, keys[:, -1])
    assert dk.mask[:, 0].all() and np.array_equal(dk.deltas[:, 0], keys[:, 0])


@pytest.mark.parametrize("refresh,n_sink", [(8, 1), (5, 3), (0, 4)])
def test_refresh_and_sinks_match_oracle(refresh, n_sink):
    keys = _walk_keys(np.random.default_rng(11), t=33)
    for mode in ("memory", "naive"):
        dk = dl.encode_delta_keys(
            keys, theta=4, delta_mode=mode, refresh_period=refresh, n_sink=n_sink
        )
        want_d, want_m, want_r = _oracle(keys, 4, mode, refresh, n_sink)
        assert np.array_equal(dk.deltas, want_d) and np.array_equal(dk.mask, want_m)
        assert np.array_equal(dk.keys_hat, want_r)
        dense = [t for t in range(33) if t < n_sink or (refresh and t % refresh == 0)]
        assert np.array_equal(dk.keys_hat[:, dense], keys[:, dense].astype(np.int64))


@pytest.mark.parametrize("theta", [2, 6, 20])
def test_memory_form_bounds(theta):
    keys = _walk_keys(np.random.default_rng(theta), t=64, d=32)
    dk = dl.encode_delta_keys(keys, theta=theta)
    err = np.abs(keys.astype(np.int64) - dk.keys_hat)
    assert err.max() < theta
    assert dk.keys_hat.min() >= -127 and dk.keys_hat.max() <= 127
    assert dk.deltas.min() >= -254 and dk.deltas.max() <= 254


def test_full_range_deltas_fit_nine_bits():
    keys = np.array([[[127], [-127], [127], [-127]]], dtype=np.int8)
    dk = dl.encode_delta_keys(keys, theta=3)
    assert dk.deltas[0, :, 0].tolist() == [127, -254, 254, -254]


@pytest.mark.parametrize("theta", [0, 1])
def test_theta_zero_one_exact(theta):
    keys = np.random.default_rng(3).integers(-127, 128, size=(3, 25, 16), dtype=np.int8)
    dk = dl.encode_delta_keys(keys, theta=theta)
    assert np.array_equal(dk.keys_hat, keys.astype(np.int64))


def test_naive_form_drifts_where_memory_form_does_not():
    # keys rise by 1 per token: every raw step is below theta=2, so the naive form never fires
    keys = np.arange(30, dtype=np.int8).reshape(1, 30, 1)
    naive = dl.encode_delta_keys(keys, theta=2, delta_mode="naive")
    memory = dl.encode_delta_keys(keys, theta=2, delta_mode="memory")
    assert np.abs(keys - naive.keys_hat).max() == 29
    assert np.abs(keys - memory.keys_hat).max() == 1


def test_sparsity_definition():
    keys = _walk_keys(np.random.default_rng(2), h=3, t=17, d=10)
    dk = dl.encode_delta_keys(keys, theta=5)
    nnz = sum(int(dk.mask[h, t, c]) for h in range(3) for t in range(1, 17) for c in range(10))
    assert dk.sparsity == 1.0 - nnz / (3 * 16 * 10)
    assert dl.encode_delta_keys(keys[:, :1], theta=5).sparsity == 0.0


def test_float_encoder():
    rng = np.random.default_rng(4)
    keys = np.cumsum(rng.normal(scale=0.3, size=(2, 30, 8)), axis=1)
    dk = dl.encode_delta_keys(keys, theta=0.5)
    assert dk.deltas.dtype == np.float64
    assert np.abs(keys - dk.keys_hat).max() < 0.5
    assert np.array_equal(dl.encode_delta_keys(keys, theta=0.0).keys_hat, keys)


def test_encoder_rejects_bad_input():
    good = np.zeros((1, 4, 2), dtype=np.int8)
    with pytest.raises(TypeError, match="int8"):
        dl.encode_delta_keys(good.astype(np.int16), theta=1)
    with pytest.raises(TypeError, match="theta"):
        dl.encode_delta_keys(good, theta=1.5)
    with pytest.raises(ValueError, match="delta_mode: unknown value 'nave'; valid: memory, naive"):
        dl.encode_delta_keys(good, theta=1, delta_mode="nave")
    with pytest.raises(ValueError, match="theta"):
        dl.encode_delta_keys(good, theta=-1)
    with pytest.raises(ValueError, match="refresh_period"):
        dl.encode_delta_keys(good, theta=1, refresh_period=-2)
    with pytest.raises(ValueError, match="n_sink"):
        dl.encode_delta_keys(good, theta=1, n_sink=0)
    with pytest.raises(ValueError, match="non-empty"):
        dl.encode_delta_keys(np.zeros((1, 0, 2), dtype=np.int8), theta=1)
    with pytest.raises(ValueError, match="NaN"):
        dl.encode_delta_keys(np.full((1, 2, 2), np.inf), theta=1.0)


def test_pack_delta_rows_front_packs_in_index_order():
    deltas = np.array([[0, 5, 0, -3, 7, 0], [1, 2, 3, 4, 5, 6], [9, 9, 9, 9, 9, 9]], dtype=np.int32)
    mask = np.array([[False, True, False, True, True, False], [True] * 6, [False] * 6], dtype=bool)
    packed, nnz = dl.pack_delta_rows(deltas, mask)
    assert packed.dtype == np.int32
    assert packed.tolist() == [[5, -3, 7, 0, 0, 0], [1, 2, 3, 4, 5, 6], [0] * 6]
    assert nnz.tolist() == [3, 6, 0]


def test_pack_unpack_round_trip_on_encoded_keys():
    rng = np.random.default_rng(7)
    keys = np.cumsum(rng.integers(-3, 4, size=(2, 50, 32)), axis=1).clip(-128, 127)
    enc = dl.encode_delta_keys(keys.astype(np.int8), theta=2)
    packed, nnz = dl.pack_delta_rows(enc.deltas, enc.mask)
    assert np.array_equal(nnz, enc.mask.sum(axis=-1))
    assert np.array_equal(dl.unpack_delta_rows(packed, enc.mask), enc.deltas)
    # the m-th packed value is the delta at the m-th lowest set bit
    h, t = 1, 17
    assert np.array_equal(packed[h, t, : nnz[h, t]], enc.deltas[h, t][enc.mask[h, t]])
    assert not packed[h, t, nnz[h, t] :].any()


@pytest.mark.parametrize(
    ("deltas", "mask", "what"),
    [
        (np.zeros((2, 4)), np.zeros((2, 3), dtype=bool), "same shape"),
        (np.zeros((2, 4)), np.zeros((2, 4)), "must be bool"),
        (np.zeros(()), np.zeros((), dtype=bool), "row axis"),
    ],
)
def test_pack_delta_rows_rejects_bad_input(deltas, mask, what):
    with pytest.raises(ValueError, match=what):
        dl.pack_delta_rows(deltas, mask)
    with pytest.raises(ValueError, match=what):
        dl.unpack_delta_rows(deltas, mask)
