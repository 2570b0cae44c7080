"""E-step kernels of topicjax.core.estep: every kernel variant against a float64 numpy loop.

The identity under test is ARTM eq. 7-8: n_wt = φ_wt ∂L/∂φ_wt and n_td = θ_td ∂L/∂θ_td, with
L = Σ n_dw log Σ_t φ_wt θ_td (eq. 4).  Kernels: the sliced layout of ``prepare`` (one block, many
blocks, many chunks, narrow pieces), and the unsliced kernel for hand-built data in any order.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus
from topicjax.artm import algorithm as em
from topicjax.core import estep, layout

T = 5


def _reference(phi, theta, dense):
    """Hand-written E-step in float64: one loop over the non-zeros (ARTM eq. 4, 7-8)."""
    W = phi.shape[0]
    D = dense.shape[0]
    n_wt = np.zeros((W, phi.shape[1]))
    n_td = np.zeros((phi.shape[1], D))
    ll = 0.0
    for d, w in zip(*np.nonzero(dense)):
        joint = phi[w] * theta[:, d]
        p = joint.sum()
        ll += dense[d, w] * np.log(p)
        n_wt[w] += dense[d, w] * joint / p
        n_td[:, d] += dense[d, w] * joint / p
    return ll, n_wt, n_td


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(11)
    D, W = 9, 60
    dense = rng.poisson(0.25, size=(D, W))
    dense[:, 0] += 1
    dense[3, :45] += 1  # one document of 45+ distinct words: several pieces of 16
    dense[5, 1:3] = 0  # and some short ones
    corpus = Corpus.from_dense(dense)
    phi = rng.random((W, T)) + 0.05
    phi /= phi.sum(0)
    theta = rng.dirichlet(np.ones(T), D).T
    ref = _reference(phi, theta, corpus.to_dense())
    return corpus, phi, theta, ref


def _hand_built(corpus, chunk, seed=0):
    """Unsliced data in shuffled order, padded with count-0 entries (no piece_doc)."""
    order = np.random.default_rng(seed).permutation(corpus.nnz)
    n = -(-corpus.nnz // chunk) * chunk
    cols = []
    for a, dt in ((corpus.doc_ids, np.int32), (corpus.word_ids, np.int32), (corpus.counts, np.float32)):
        a = np.concatenate([np.asarray(a)[order], np.zeros(n - corpus.nnz, a.dtype)]).astype(dt)
        cols.append(jnp.asarray(a.reshape(-1, chunk)))
    return layout.DocWordCounts(*cols)


KERNELS = {
    "sliced-one-chunk": lambda c: layout.prepare(c),
    "sliced-many-chunks": lambda c: layout.prepare(c, chunk=32),
    "sliced-narrow-pieces": lambda c: layout.prepare(c, chunk=8),
    "flat-shuffled": lambda c: _hand_built(c, 16),
}


def _check(out, phi, theta, ref, rtol=2e-5):
    ll, g_phi, g_theta = out
    ll_ref, n_wt, n_td = ref
    np.testing.assert_allclose(float(ll), ll_ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(phi * g_phi, float), n_wt, rtol=rtol, atol=1e-5)
    np.testing.assert_allclose(np.asarray(theta * g_theta, float), n_td, rtol=rtol, atol=1e-5)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernel_matches_numpy_loop(case, kernel):
    corpus, phi, theta, ref = case
    data = KERNELS[kernel](corpus)
    assert (data.piece_doc is None) == kernel.startswith("flat")
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    out = estep.expected_counts(p, t, data)
    _check(out, p, t, ref)
    # Counts conserve tokens (Σ n_wt = Σ n_td = n) and the flags drop exactly one output.
    assert abs(float((p * out[1]).sum()) - corpus.n_tokens) < 1e-3
    ll, g_phi, g_theta = estep.expected_counts(p, t, data, need_phi=False)
    assert g_phi is None and float(ll) == pytest.approx(float(out[0]), rel=1e-7)
    np.testing.assert_allclose(np.asarray(g_theta), np.asarray(out[2]), rtol=1e-6)
    ll, g_phi, g_theta = estep.expected_counts(p, t, data, need_theta=False)
    assert g_theta is None
    np.testing.assert_allclose(np.asarray(g_phi), np.asarray(out[1]), rtol=1e-6)


@pytest.mark.parametrize("theta_rows", [True, False])
def test_sliced_kernel_theta_layouts(case, theta_rows):
    """Both ways of reading θ_d (rows of Θᵀ for accelerators, columns of Θ on CPU)."""
    corpus, phi, theta, ref = case
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    data = layout.prepare(corpus, chunk=32)
    _check(estep.sliced_counts(p, t, data, True, True, theta_rows), p, t, ref)
    ll, g_phi, g_theta = estep.sliced_counts(p, t, data, False, True, theta_rows)
    assert g_phi is None and g_theta.shape == t.shape


def test_many_blocks_per_chunk_give_the_same_counts(case, monkeypatch):
    """Re-blocking a stored chunk into several E-step blocks (small CPU_BLOCK_ELEMENTS)."""
    corpus, phi, theta, ref = case
    data = layout.prepare(corpus)
    K = data.piece_doc.shape[1]
    monkeypatch.setattr(estep, "CPU_BLOCK_ELEMENTS", 2 * layout.PIECE * T)  # 2 pieces per block
    assert estep.block_pieces(K, layout.PIECE, T, 4, "cpu") < K
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    _check(estep.expected_counts(p, t, data), p, t, ref)


def test_float64_matches_to_round_off(case):
    corpus, phi, theta, ref = case
    with jax.enable_x64(True):
        data = layout.prepare(corpus, dtype=jnp.float64)
        assert data.count.dtype == jnp.float64
        ll, g_phi, g_theta = estep.expected_counts(jnp.asarray(phi), jnp.asarray(theta), data)
        assert g_phi.dtype == jnp.float64
        np.testing.assert_allclose(float(ll), ref[0], rtol=1e-12)
        np.testing.assert_allclose(phi * np.asarray(g_phi), ref[1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(theta * np.asarray(g_theta), ref[2], rtol=1e-10, atol=1e-12)


def test_sliced_layout_invariants(case):
    corpus = case[0]
    for chunk in (None, 8, 32, 100):
        data = layout.prepare(corpus, chunk=chunk)
        doc, word, count = (np.asarray(a).ravel() for a in data[:3])
        C, B = data.word.shape
        K = data.piece_doc.shape[1]
        L = B // K
        assert B == K * L and L == (16 if chunk is None else min(16, chunk))
        # Document ids sorted; every piece belongs to one document, named by piece_doc.
        assert np.all(np.diff(doc) >= 0)
        pieces = doc.reshape(-1, L)
        assert np.all(pieces == np.asarray(data.piece_doc).reshape(-1, 1))
        # Padding has count 0; the non-zeros are exactly the corpus's.
        nz = count > 0
        assert nz.sum() == corpus.nnz and count.sum() == corpus.n_tokens
        np.testing.assert_array_equal(doc[nz], corpus.doc_ids)
        np.testing.assert_array_equal(word[nz], corpus.word_ids)
        np.testing.assert_array_equal(count[nz], corpus.counts)


def test_block_pieces_choice():
    # A divisor of the stored chunk near the target; the whole chunk off CPU.
    assert estep.CPU_BLOCK_ELEMENTS == 409_600
    assert estep.block_pieces(1024, 16, 100, 4, "cpu") == 256  # 409600 / (16 * 100) = 256
    assert estep.block_pieces(1024, 16, 200, 4, "cpu") == 128
    assert estep.block_pieces(1024, 16, 200, 8, "cpu") == 64  # float64: half the elements
    assert estep.block_pieces(1000, 16, 200, 4, "cpu") == 125  # a divisor, not a power of two
    assert estep.block_pieces(1024, 16, 20, 4, "cpu") == 1024  # small T: the whole chunk
    assert estep.block_pieces(1024, 16, 100, 4, "gpu") == 1024
    # A prime number of pieces has no useful divisor: one block rather than 1-piece blocks.
    assert estep.block_pieces(1031, 16, 100, 4, "cpu") == 1031


def test_masked_counts_keep_the_layout_valid(case):
    """ARTM removes documents with ``data._replace(count=count * alive[doc])``."""
    corpus, phi, theta, _ = case
    alive = np.ones(corpus.n_docs, bool)
    alive[[1, 3]] = False
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    data = layout.prepare(corpus, chunk=32)
    masked = data._replace(count=data.count * jnp.asarray(alive)[data.doc])
    dense = corpus.to_dense() * alive[:, None]
    _check(estep.expected_counts(p, t, masked), p, t, _reference(phi, theta, dense))


def test_vmap_over_models_equals_separate_calls(case):
    """A batch of models through one vmapped E-step (the route of ARTM's model grids)."""
    corpus, phi, theta, _ = case
    data = layout.prepare(corpus, chunk=32)
    phis = jnp.stack([jnp.asarray(phi, jnp.float32), jnp.asarray(phi[::-1], jnp.float32)])
    thetas = jnp.stack([jnp.asarray(theta, jnp.float32)] * 2)
    batched = jax.vmap(lambda a, b: estep.expected_counts(a, b, data))(phis, thetas)
    for i in range(2):
        single = estep.expected_counts(phis[i], thetas[i], data)
        for x, y in zip(batched, single):
            np.testing.assert_allclose(np.asarray(x[i]), np.asarray(y), rtol=1e-5)


def test_bad_chunk_is_rejected(case):
    with pytest.raises(ValueError, match="chunk must be a positive"):
        layout.prepare(case[0], chunk=0)


def test_benchmark_quick_smoke_run(tmp_path, load_experiment):
    """experiments/bench_em.py --quick: ours on a small synthetic corpus, table written; with
    several devices (tests/test_gpu_paths.py's multi-device run) also the pass sharded over them."""
    bench = load_experiment("bench_em")
    out = tmp_path / "bench.md"
    summary = bench.main(["--quick", "--out", str(out)])
    text = out.read_text()
    assert "Command:" in text and "| ours |" in text and "time to hold-out perplexity" in text
    n = len(jax.devices())
    assert [s[2] for s in summary] == ["ours"] + ([f"ours-{n}dev"] if n > 1 else [])
    assert all(s[3] > 0 for s in summary)


def _dense_offline_pass(phi, dense, doc_passes, beta=0.0, gamma=0.0):
    """float64 reference of BigARTM's offline pass (Θ from uniform, doc_passes Θ-only
    iterations, then one full E-step) for R = β Σ log φ + γ Σ log θ (φ ∂R/∂φ = β, θ ∂R/∂θ = γ)."""
    N = dense.T.astype(float)
    theta = np.full((phi.shape[1], N.shape[1]), 1.0 / phi.shape[1])
    for _ in range(doc_passes):
        a = theta * (phi.T @ (N / (phi @ theta))) + gamma
        theta = a / a.sum(0)
    R = N / (phi @ theta)
    a_phi = phi * (R @ theta.T) + beta
    a_theta = theta * (phi.T @ R) + gamma
    return a_phi / a_phi.sum(0), a_theta / a_theta.sum(0), float(np.sum(N[N > 0] * np.log((phi @ theta)[N > 0])))


@pytest.mark.parametrize("coefs", [None, (0.05, 0.1)])
def test_offline_step_matches_dense_reference(case, coefs):
    corpus, phi, theta, _ = case
    beta, gamma = coefs or (0.0, 0.0)

    def smooth(p, t):  # R = β Σ log φ + γ Σ log θ
        return beta * jnp.sum(jnp.log(p)) + gamma * jnp.sum(jnp.log(t))

    step = em.make_step(None if coefs is None else smooth, cfg=em.EMConfig(remove=False, doc_passes=4))
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)._replace(
        phi=jnp.asarray(phi, jnp.float32), theta=jnp.asarray(theta, jnp.float32))
    new = step(state, layout.prepare(corpus, chunk=32))
    ref_phi, ref_theta, ref_ll = _dense_offline_pass(phi, corpus.to_dense(), 4, beta, gamma)
    np.testing.assert_allclose(np.asarray(new.phi), ref_phi, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(new.theta), ref_theta, rtol=1e-4, atol=1e-6)
    assert float(new.loglik) == pytest.approx(ref_ll, rel=1e-5)


def _models(case, G=3):
    """G different (Φ, Θ) pairs on the case's corpus and their float64 loop references."""
    corpus, phi0, theta0, _ = case
    rng = np.random.default_rng(5)
    phis = np.stack([phi0] + [rng.dirichlet(np.ones(corpus.n_words), T).T for _ in range(G - 1)])
    thetas = np.stack([theta0] + [rng.dirichlet(np.ones(T), corpus.n_docs).T for _ in range(G - 1)])
    return phis, thetas


@pytest.mark.parametrize("chunk", [None, 32])
def test_vmapped_kernel_matches_numpy_loop_per_model(case, chunk):
    """Under vmap the sliced E-step runs as one side-by-side kernel (custom_vmap rule); every
    model's counts must equal the float64 loop for that model, also with per-model counts."""
    corpus = case[0]
    data = layout.prepare(corpus, chunk=chunk)
    phis, thetas = _models(case)
    dense = corpus.to_dense()
    out = jax.jit(jax.vmap(lambda p, t: estep.expected_counts(p, t, data)))(
        jnp.asarray(phis, jnp.float32), jnp.asarray(thetas, jnp.float32))
    for g in range(len(phis)):
        _check([o[g] for o in out], phis[g], thetas[g], _reference(phis[g], thetas[g], dense))
    # per-model counts (e.g. ARTM's removed documents), one Θ shared by all models
    scale = jnp.asarray([1.0, 2.0, 0.0])
    out = jax.vmap(lambda p, s: estep.expected_counts(p, thetas[0], data._replace(count=data.count * s)))(
        jnp.asarray(phis, jnp.float32), scale)
    for g in range(len(phis)):
        _check([o[g] for o in out], phis[g], thetas[0], _reference(phis[g], thetas[0], dense * float(scale[g])))
    # one half of the E-step only, and the gradient of log_likelihood, under vmap
    ll, none, g_theta = jax.vmap(lambda t: estep.expected_counts(phis[0], t, data, need_phi=False))(
        jnp.asarray(thetas, jnp.float32))
    assert none is None and g_theta.shape == thetas.shape
    grads = jax.vmap(jax.grad(lambda p, t: estep.log_likelihood(p, t, data), argnums=(0, 1)))(
        jnp.asarray(phis, jnp.float32), jnp.asarray(thetas, jnp.float32))
    for g in range(len(phis)):
        ll_ref, n_wt, n_td = _reference(phis[g], thetas[g], dense)
        np.testing.assert_allclose(np.asarray(phis[g] * grads[0][g], float), n_wt, rtol=2e-5, atol=1e-5)
        np.testing.assert_allclose(float(ll[g]), _reference(phis[0], thetas[g], dense)[0], rtol=1e-6)


def test_vmapped_kernel_with_per_model_layouts(case):
    """Models whose data layouts differ (batched word ids) fall back to a plain vmap."""
    corpus, phi, theta, ref = case
    data = layout.prepare(corpus, chunk=32)
    words = jnp.stack([data.word, data.word])
    out = jax.vmap(lambda w: estep.expected_counts(phi, theta, data._replace(word=w)))(words)
    for g in range(2):
        _check([o[g] for o in out], phi, theta, ref)


def test_vmapped_kernel_batch_of_one(case):
    """A batch of one model runs the single-model kernel (same bits as no vmap)."""
    corpus, phi, theta, ref = case
    data = layout.prepare(corpus, chunk=32)
    p, t = jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32)
    out = jax.vmap(lambda p, t: estep.expected_counts(p, t, data))(p[None], t[None])
    single = estep.expected_counts(p, t, data)
    for a, b in zip(out, single):
        np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b))
    _check([o[0] for o in out], phi, theta, ref)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_second_derivatives_finite_for_a_document_without_topics(case, kernel):
    """A document whose θ column is all zeros (emptied by sparsing) has p = 0 for all its words:
    its terms are clamped at EPS, where the derivative of n / p is n / EPS² = inf in float32.
    Second derivatives (what hypergradients differentiate) must stay finite, and equal those of
    the corpus without that document, which contributes nothing to Φ's counts."""
    from topicjax.tune.backend import differentiable

    corpus, phi, theta, _ = case
    theta = np.array(theta)
    theta[:, 3] = 0.0
    keep = np.flatnonzero(np.arange(corpus.n_docs) != 3)

    def hvp(c, t):
        data = differentiable(KERNELS[kernel](c))
        t = jnp.asarray(t, jnp.float32)
        return jax.jit(jax.grad(lambda p: jnp.sum(jax.grad(estep.log_likelihood)(p, t, data) ** 2)))(
            jnp.asarray(phi, jnp.float32))

    got = np.asarray(hvp(corpus, theta))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, np.asarray(hvp(corpus.subset(keep), theta[:, keep])), rtol=1e-5, atol=1e-3)
