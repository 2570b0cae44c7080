"""TTMM's sparse products (``N @ table`` and ``Nᵀ @ table``, the sums of its E-step, eq. 2 and the
R of eq. 8-11) in the fused E-step kernel against a float64 numpy loop, the pure-JAX scan (the
XLA fallback), and other thread counts; and a TTMM EM fit with either backend.

The layouts are built here from the printed sliced structure (pieces of 16 slots, k pieces per
chunk, padding slots and whole padding pieces, a document without pieces, a chunk of padding)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax.core import kernels
from topicjax.core.layout import DocWordCounts
from topicjax.ttmm import sweeps

needs_kernel = pytest.mark.skipif(not kernels.available(), reason=f"kernel not built ({kernels.load_error()})")


@pytest.fixture(autouse=True)
def _restore():
    yield
    kernels.set_threads()


def sliced(dense, width=16, k=2, extra_chunks=1):
    pieces = []
    for d in range(dense.shape[0]):
        entries = [(int(w), float(dense[d, w])) for w in np.flatnonzero(dense[d])]
        for start in range(0, len(entries), width):
            part = entries[start:start + width]
            pieces.append((d, part + [(0, 0.0)] * (width - len(part))))
    last = pieces[-1][0]
    n_chunks = -(-len(pieces) // k) + extra_chunks
    while len(pieces) < n_chunks * k:
        pieces.append((last, [(0, 0.0)] * width))
    piece_doc = np.array([p[0] for p in pieces], np.int32).reshape(n_chunks, k)
    word = np.array([[w for w, _ in p[1]] for p in pieces], np.int32).reshape(n_chunks, k * width)
    count = np.array([[n for _, n in p[1]] for p in pieces], np.float32).reshape(n_chunks, k * width)
    doc = np.repeat(piece_doc, width, axis=1)
    return DocWordCounts(jnp.asarray(doc), jnp.asarray(word), jnp.asarray(count), jnp.asarray(piece_doc))


def random_dense(seed, D=30, W=50):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.8, (D, W)) * (rng.random((D, W)) < 0.6)
    dense[4] = 0  # a document without pieces
    dense[7, :40] = rng.integers(1, 5, 40)  # a document over several pieces and chunks
    return dense


@jax.jit
def both(table_w, table_d, data):
    D, W = table_d.shape[0], table_w.shape[0]
    return sweeps.sparse_sums(table_w, data, D, by_doc=True), sweeps.sparse_sums(table_d, data, W, by_doc=False)


@jax.jit
def xla_four(table_w, table_d, data):
    """The pure-JAX products, with the layout's doc array and without it (theme_layout's layout:
    each slot's document from its piece's), in one program (called eagerly, each scan and its
    surroundings would compile apart)."""
    D, W = table_d.shape[0], table_w.shape[0]
    nodoc = data._replace(doc=None)
    return (sweeps.xla_sums(table_w, data, D, by_doc=True), sweeps.xla_sums(table_d, data, W, by_doc=False),
            sweeps.xla_sums(table_w, nodoc, D, by_doc=True), sweeps.xla_sums(table_d, nodoc, W, by_doc=False))


@needs_kernel
@pytest.mark.parametrize("X", [1, 3, 10, 33])
def test_sparse_sums_equal_float64_products_and_xla(X):
    dense = random_dense(X)
    D, W = dense.shape
    rng = np.random.default_rng(100 + X)
    table_w = rng.normal(size=(W, X)).astype(np.float32)
    table_d = rng.random((D, X)).astype(np.float32)
    data = sliced(dense)
    with kernels.backend("ffi"):
        by_doc, by_word = [np.asarray(x) for x in both(jnp.asarray(table_w), jnp.asarray(table_d), data)]
        assert "topicjax_estep" in both.lower(jnp.asarray(table_w), jnp.asarray(table_d), data).as_text()
    with kernels.backend("xla"):
        assert "topicjax_estep" not in both.lower(jnp.asarray(table_w), jnp.asarray(table_d), data).as_text()
    want_doc = dense.astype(np.float64) @ table_w.astype(np.float64)
    want_word = dense.T.astype(np.float64) @ table_d.astype(np.float64)
    np.testing.assert_allclose(by_doc, want_doc, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(by_word, want_word, rtol=1e-5, atol=1e-4)
    assert not by_doc[4].any()
    xd, xw, nodoc_d, nodoc_w = [np.asarray(x) for x in xla_four(jnp.asarray(table_w), jnp.asarray(table_d), data)]
    np.testing.assert_allclose(by_doc, xd, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(by_word, xw, rtol=1e-5, atol=1e-4)
    # without the doc array (theme_layout's layout): each slot's document from its piece's
    np.testing.assert_allclose(nodoc_d, want_doc, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(nodoc_w, want_word, rtol=1e-5, atol=1e-4)


@needs_kernel
def test_sparse_sums_derivatives_equal_xla():
    """Gradients (reverse mode, through the kernel's custom JVP) and second derivatives equal
    those of the pure-JAX products."""
    dense = random_dense(3)
    D, W = dense.shape
    data = sliced(dense)
    rng = np.random.default_rng(4)
    table_w = jnp.asarray(0.05 * rng.normal(size=(W, 4)), jnp.float32)  # N t of order 1: no round-off blow-up in sin
    weights = jnp.asarray(rng.normal(size=(D, 4)), jnp.float32)

    def loss(t, d):
        return jnp.sum(jnp.sin(sweeps.sparse_sums(t, d, D, by_doc=True)) * weights)

    got = {}
    for name in ("ffi", "xla"):
        with kernels.backend(name):
            g = jax.jit(jax.grad(loss))(table_w, data)
            h = jax.jit(lambda t, d: jax.jvp(lambda x: jax.grad(loss)(x, d), (t,), (jnp.ones_like(t),))[1])(table_w, data)
            got[name] = (np.asarray(g), np.asarray(h))
    np.testing.assert_allclose(got["ffi"][0], got["xla"][0], rtol=1e-5, atol=1e-5)
    scale = np.abs(got["xla"][1]).max()
    np.testing.assert_allclose(got["ffi"][1], got["xla"][1], rtol=1e-4, atol=1e-5 * scale)
    # and the gradient is the float64 one: Nᵀ (cos(N t) ∘ weights)
    want = dense.T @ (np.cos(dense @ np.asarray(table_w, np.float64)) * np.asarray(weights, np.float64))
    np.testing.assert_allclose(got["ffi"][0], want, rtol=1e-4, atol=1e-4)


@needs_kernel
def test_sparse_sums_threads():
    dense = random_dense(1, D=300, W=80)
    rng = np.random.default_rng(2)
    table_w = rng.normal(size=(80, 7))
    table_d = rng.random((300, 7))
    data = sliced(dense, k=4)
    outs = []
    with kernels.backend("ffi"):
        for n in (1, 2, 3):
            kernels.set_threads(n)
            outs.append([np.asarray(x) for x in both(jnp.asarray(table_w, jnp.float32),
                                                     jnp.asarray(table_d, jnp.float32), data)])
    # documents have one owner: their sums are the same bits; word sums are added over
    # threads in another order (round-off)
    for o in outs[1:]:
        np.testing.assert_array_equal(o[0], outs[0][0])
        np.testing.assert_allclose(o[1], outs[0][1], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(outs[0][1], dense.T @ table_d, rtol=1e-5, atol=1e-4)


@needs_kernel
def test_ttmm_em_fit_equals_xla_fit():
    """TTMM EM with either backend: the same likelihood path to float32 round-off."""
    from topicjax.ttmm import TTMM, params

    p = params.synthetic_params(3, 4, 40)
    corpus = params.sample_corpus(p, 120, doc_length=40, seed=0)[0]
    fits = {}
    for name in ("ffi", "xla"):
        with kernels.backend(name):
            fits[name] = TTMM(n_themes=3, n_components=4, max_iter=15, random_state=0, progress=False).fit(corpus)
    a, b = fits["ffi"], fits["xla"]
    np.testing.assert_allclose(a.pi_, b.pi_, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(a.beta_, b.beta_, rtol=1e-3, atol=1e-5)
    assert np.all(np.diff(a.loglik_history_) >= -1e-6 * abs(a.loglik_history_[-1]))
