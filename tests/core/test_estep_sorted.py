"""The XLA E-step without per-slot atomics (issue 41, items 1 and 5).

∂L/∂Φ is reduced per word piece over the word-sorted mirror of the sliced layout
(:class:`topicjax.core.layout.WordMirror`), ∂L/∂Θ per document piece, and every scatter of the
E-step then adds one row per piece with sorted indices.  Checked here, on CPU:

* the new path equals the per-slot scatter path (``TOPICJAX_ESTEP=xla_scatter``) and a float64
  loop over the non-zeros (ARTM eq. 4, 7-8), for ragged documents, padding, words that fill
  several pieces and several tiles, T = 7, every combination of the gradients asked, and for the
  side-by-side kernel of G models;
* the mirror holds every non-zero once, its pieces' words are those of their slots, padding
  reads nothing, and the words of every block the kernel takes are sorted -- the proof behind
  its ``indices_are_sorted=True``;
* the E-step lowered for CUDA (``jax.export``, no GPU needed) has no scatter without
  ``indices_are_sorted = true``; the per-slot path (the control) has one;
* the CPU-compiled E-step holds no (non-zeros x T) temporary (``memory_analysis``).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus
from topicjax.core import estep, kernels, layout
from tests.core.test_estep import _reference  # the hand-written float64 E-step (eq. 4, 7-8)

T = 7  # not a multiple of anything the kernels block by

# one compiled program per layout and setting (called eagerly, each of the E-step's operations
# compiled on its own: many more, smaller compilations)
_sliced_counts = jax.jit(estep.sliced_counts, static_argnums=(3, 4, 5, 6))
_sliced_counts_models = jax.jit(estep.sliced_counts_models, static_argnums=(4, 5, 6))


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(41)
    D, W = 13, 50
    dense = rng.poisson(0.3, size=(D, W))
    dense[:, 3] += 2  # a word in every document: pieces of 16 and a partial one, in every tile
    dense[2, :40] += 1  # a document of 40+ distinct words: three document pieces
    dense[7] = 0
    dense[7, 49] = 5  # a one-word document, of the last word
    dense[:, 0] = 0  # word 0 absent: padding must not add into it (nor into any word)
    corpus = Corpus.from_dense(dense)
    phi = rng.random((W, T)) + 0.05
    phi[0] = 0.0
    phi /= phi.sum(0)
    theta = rng.dirichlet(np.ones(T), D).T
    return corpus, phi, theta, _reference(phi, theta, corpus.to_dense())


# (chunk, documents per tile): one chunk, many chunks, narrow pieces; one tile or several
LAYOUTS = [(None, None), (32, None), (8, None), (None, 4), (32, 3)]


def _prepare(corpus, chunk, tile, monkeypatch, dtype=jnp.float32):
    if tile is not None:
        monkeypatch.setattr(layout, "MIRROR_TILE_DOCS", tile)
    return layout.prepare(corpus, chunk=chunk, dtype=dtype, word_mirror=True)


@pytest.mark.parametrize("chunk,tile", LAYOUTS)
def test_word_pieces_equal_per_slot_scatter_and_float64_loop(case, chunk, tile, monkeypatch):
    corpus, phi, theta, (ll_ref, n_wt, n_td) = case
    with jax.enable_x64(True):
        data64 = _prepare(corpus, chunk, tile, monkeypatch, jnp.float64)
        p64, t64 = jnp.asarray(phi), jnp.asarray(theta)
        ll, g_phi, g_theta = _sliced_counts(p64, t64, data64, True, True, None, False)
        np.testing.assert_allclose(float(ll), ll_ref, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(p64 * g_phi), n_wt, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(np.asarray(t64 * g_theta), n_td, rtol=1e-11, atol=1e-13)
        # ∂L/∂Φ alone: the word pass also sums L
        ll_w, g_phi_w, none = _sliced_counts(p64, t64, data64, True, False, None, False)
        assert none is None
        np.testing.assert_allclose(float(ll_w), ll_ref, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(p64 * g_phi_w), n_wt, rtol=1e-11, atol=1e-13)
    data = _prepare(corpus, chunk, tile, monkeypatch)
    p32, t32 = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    # (∂L/∂Θ alone never reads the mirror)
    for need_phi, need_theta, theta_rows in ((True, True, False), (True, True, True), (True, False, None)):
        new = _sliced_counts(p32, t32, data, need_phi, need_theta, theta_rows, False)
        old = _sliced_counts(p32, t32, data, need_phi, need_theta, theta_rows, True)
        np.testing.assert_allclose(float(new[0]), float(old[0]), rtol=1e-6)
        for a, b in zip(new[1:], old[1:]):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    # word 0 is in no document: padding slots (word id 0 in the layout) added nothing to it
    assert float(jnp.abs(new[1][0]).max()) == 0.0


@pytest.mark.parametrize("chunk,tile", [(None, None), (32, 3)])
def test_models_kernel_word_pieces_equal_float64_loop(case, chunk, tile, monkeypatch):
    """The side-by-side kernel of G models (``fit_many`` under vmap), per-model counts."""
    corpus, phi, theta, _ = case
    G = 3
    rng = np.random.default_rng(5)
    phis = rng.random((G,) + phi.shape) + 0.05
    phis /= phis.sum(1, keepdims=True)
    thetas = rng.dirichlet(np.ones(T), (G, corpus.n_docs)).transpose(0, 2, 1)  # (G, T, D)
    weights = np.array([1.0, 0.5, 2.0])
    dense = corpus.to_dense()
    with jax.enable_x64(True):
        data = _prepare(corpus, chunk, tile, monkeypatch, jnp.float64)
        count = jnp.stack([data.count * w for w in weights], axis=-1)
        phi_w = jnp.asarray(phis.transpose(1, 0, 2))  # (W, G, T)
        theta_w = jnp.asarray(thetas.transpose(2, 0, 1))  # (D, G, T)
        for need_theta in (True, False):
            ll, g_phi, g_theta = _sliced_counts_models(phi_w, theta_w, count, data, True, need_theta, False)
            for g in range(G):
                ll_ref, n_wt, n_td = _reference(phis[g], thetas[g], dense * weights[g])
                np.testing.assert_allclose(float(ll[g]), ll_ref, rtol=1e-12)
                np.testing.assert_allclose(np.asarray(phi_w[:, g] * g_phi[:, g]), n_wt, rtol=1e-11, atol=1e-13)
                if need_theta:
                    np.testing.assert_allclose(np.asarray(theta_w[:, g] * g_theta[:, g]).T, n_td, rtol=1e-11,
                                               atol=1e-13)
                else:
                    assert g_theta is None


@pytest.mark.parametrize("chunk,tile", LAYOUTS)
def test_mirror_covers_every_nonzero_once_in_sorted_blocks(case, chunk, tile, monkeypatch):
    corpus = case[0]
    data = _prepare(corpus, chunk, tile, monkeypatch)
    slot = np.asarray(data.mirror.slot)
    piece_word = np.asarray(data.mirror.piece_word)
    word, count = np.asarray(data.word).ravel(), np.asarray(data.count).ravel()
    n_slots = word.size
    Cw, Kw = piece_word.shape
    L = slot.shape[1] // Kw
    assert slot.dtype == piece_word.dtype == np.int32
    assert L == data.word.shape[1] // data.piece_doc.shape[1]
    real = slot[slot < n_slots]
    # every non-zero of the layout exactly once; nothing else (padding reads past the end)
    assert np.array_equal(np.sort(real), np.flatnonzero(count > 0))
    assert np.all((slot == n_slots) | (slot < n_slots))
    # each piece's slots are of its word; a padding piece (word past every Φ) has no slot
    pieces = slot.reshape(-1, L)
    words = piece_word.reshape(-1)
    pad_piece = words == np.iinfo(np.int32).max
    assert np.all(pieces[pad_piece] == n_slots)
    live = pieces < n_slots
    assert np.all(word[np.where(live, pieces, 0)][live] == np.repeat(words, L).reshape(-1, L)[live])
    assert np.all(live[~pad_piece, 0])  # a real piece starts with a non-zero
    # within a tile a word's slots are in document order
    doc = np.asarray(data.doc).ravel()
    for row in pieces[~pad_piece]:
        d = doc[row[row < n_slots]]
        assert np.all(np.diff(d) > 0)
    # the proof behind indices_are_sorted=True: each chunk's words never decrease, and every
    # block the kernel takes is a run of pieces of one chunk, for any T and either backend
    assert np.all(np.diff(piece_word, axis=1) >= 0)
    for T_ in (1, 7, 100, 5000):
        for backend in ("cpu", "gpu"):
            k = estep.block_pieces(Kw, L, T_, 4, backend)
            assert Kw % k == 0
            assert np.all(np.diff(piece_word.reshape(-1, k), axis=1) >= 0)
    blocks = np.asarray(estep._word_blocks(data, T, 4)[1])
    assert np.all(np.diff(blocks, axis=1) >= 0)
    # and the document side's scatter (per document piece) likewise
    assert np.all(np.diff(np.asarray(data.piece_doc), axis=1) >= 0)


def test_mirror_of_a_big_tiled_corpus(monkeypatch):
    """Many documents and tiles, a Zipf-like vocabulary: the same invariants at a size where
    words span many pieces, chunks and tiles."""
    rng = np.random.default_rng(3)
    D, W = 600, 300
    lens = rng.integers(1, 60, D)
    rows = [np.unique(np.minimum(rng.zipf(1.3, n), W) - 1) for n in lens]
    corpus = Corpus.from_lists([[(int(w), 1 + int(w) % 3) for w in r] for r in rows], n_words=W)
    monkeypatch.setattr(layout, "MIRROR_TILE_DOCS", 128)
    data = layout.prepare(corpus, chunk=256, word_mirror=True)
    slot = np.asarray(data.mirror.slot)
    piece_word = np.asarray(data.mirror.piece_word)
    count = np.asarray(data.count).ravel()
    assert np.array_equal(np.sort(slot[slot < count.size]), np.flatnonzero(count > 0))
    assert np.all(np.diff(piece_word, axis=1) >= 0)
    # tiles: the first word of a chunk may be smaller than the last of the one before
    assert np.any(piece_word[1:, 0] < piece_word[:-1, -1])


def test_prepare_adds_the_mirror_for_the_xla_estep_only(case):
    corpus = case[0]
    with kernels.backend("xla"):
        assert layout.prepare(corpus).mirror is not None
    with kernels.backend("xla_scatter"):  # the former XLA E-step, its memory included
        assert layout.prepare(corpus).mirror is None
    if kernels.available() and jax.default_backend() == "cpu":
        for name in ("ffi", "auto"):  # the compiled kernel's memory is unchanged
            with kernels.backend(name):
                assert layout.prepare(corpus).mirror is None
        with kernels.backend("auto"):  # bfloat16 runs the XLA E-step, on a CPU the per-slot pass (faster there)
            assert layout.prepare(corpus, dtype=jnp.bfloat16).mirror is None
    assert layout.prepare(corpus, word_mirror=False).mirror is None
    assert layout.prepare(corpus, word_mirror=True).mirror is not None


def _scatters(text):
    """The attribute dictionaries of the scatter ops of a StableHLO module's text."""
    return re.findall(r'"stablehlo\.scatter"\([^)]*\)\s*<\{([^}]*)\}', text)


def _cuda_module(f, *args):
    return jax.export.export(jax.jit(f), platforms=["cuda"])(*args).mlir_module()


def test_estep_lowered_for_cuda_has_only_sorted_scatters(case):
    corpus, phi, theta, _ = case
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)

    def one(p, t, d):  # the E-step of a fit: value and both gradients through the custom_vjp
        return jax.value_and_grad(estep.log_likelihood, argnums=(0, 1))(p, t, d)

    def models(p, t, d):  # a batch of models (fit_many): the side-by-side kernel
        return jax.vmap(lambda a, b: estep.expected_counts(a, b, d))(p, t)

    pg, tg = jnp.stack([p, p * 1.0]), jnp.stack([t, t * 1.0])
    with kernels.backend("xla"):
        data = layout.prepare(corpus, chunk=32)
        assert data.mirror is not None
        for f, args in ((one, (p, t, data)), (models, (pg, tg, data))):
            found = _scatters(_cuda_module(f, *args))
            assert found, "no scatter found: the parser no longer sees the module's scatters"
            assert all("indices_are_sorted = true" in a for a in found), found
        # theta read by columns (the CPU choice) too
        found = _scatters(_cuda_module(lambda p, t, d: estep.sliced_counts(p, t, d, True, True, False), p, t, data))
        assert found and all("indices_are_sorted = true" in a for a in found)
    with kernels.backend("xla_scatter"):  # control: the per-slot path has an unsorted scatter
        found = _scatters(_cuda_module(one, p, t, data))
        assert any("indices_are_sorted = true" not in a for a in found)


def test_compiled_estep_holds_no_nonzeros_by_topics_temporary():
    """CPU-compiled XLA E-step at a size where nnz x T x 4 bytes (61 MB) dwarfs Φ, Θ and the
    counts: its temporaries stay far below it (the blocks are ``CPU_BLOCK_ELEMENTS``)."""
    rng = np.random.default_rng(0)
    D, W, T_ = 1500, 400, 64
    rows = [np.sort(rng.choice(W, size=160, replace=False)) for _ in range(D)]
    corpus = Corpus.from_lists([[(int(w), 1) for w in r] for r in rows], n_words=W)
    nnz = corpus.nnz
    data = layout.prepare(corpus, word_mirror=True)
    phi = jax.ShapeDtypeStruct((W, T_), jnp.float32)
    theta = jax.ShapeDtypeStruct((T_, D), jnp.float32)

    def f(p, t, d):
        return estep.sliced_counts(p, t, d, True, True, per_slot=False)

    temp = jax.jit(f).lower(phi, theta, data).compile().memory_analysis().temp_size_in_bytes
    big = nnz * T_ * 4
    assert big > 20 * (W * T_ * 4 + D * T_ * 4)
    assert temp < big // 4, (temp, big)
