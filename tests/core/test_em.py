"""The EM family's step: E-step counts against a numpy loop, monotone likelihood, distributions,
seeds, the clamp convention, inference with Φ fixed, the flags of Notes 1-2 and of non-finite
counts, the memory of the donated step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus, datasets
from topicjax.artm import algorithm as em
from topicjax.core import estep, kernels, layout, mstep
from topicjax.evaluation import metrics

T = 4


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(3)
    dense = rng.poisson(1.5, size=(7, 9))
    dense[:, 0] += 1  # no empty documents
    return Corpus.from_dense(dense)


@pytest.fixture(scope="module")
def step():
    return em.make_step()


def _loop_counts(phi, theta, corpus):
    """Hand-written E-step (ARTM eq. 6-8): one loop over documents and words."""
    W, T = phi.shape
    n_wt = np.zeros((W, T))
    n_td = np.zeros((T, corpus.n_docs))
    ll = 0.0
    dense = corpus.to_dense()
    for d in range(corpus.n_docs):
        for w in range(W):
            n = dense[d, w]
            if n == 0:
                continue
            joint = phi[w] * theta[:, d]
            p = joint.sum()
            ll += n * np.log(p)
            n_wt[w] += n * joint / p
            n_td[:, d] += n * joint / p
    return ll, n_wt, n_td


@pytest.mark.parametrize("chunk", [8, 16, None])
def test_expected_counts_match_loop(tiny, chunk):
    state = em.init(jax.random.key(1), tiny.n_words, tiny.n_docs, T)
    theta = jax.random.dirichlet(jax.random.key(2), jnp.ones(T), (tiny.n_docs,)).T
    data = layout.prepare(tiny, chunk=chunk)
    ll, g_phi, g_theta = estep.expected_counts(state.phi, theta, data)
    ll_ref, n_wt, n_td = _loop_counts(np.asarray(state.phi, float), np.asarray(theta, float), tiny)
    np.testing.assert_allclose(np.asarray(state.phi * g_phi), n_wt, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(theta * g_theta), n_td, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(float(ll), ll_ref, rtol=1e-6)
    # Counts conserve tokens: Σ_wt n_wt = Σ_td n_td = n.
    assert abs(float((state.phi * g_phi).sum()) - tiny.n_tokens) < 1e-3


def test_log_likelihood_gradient_is_autodiff_of_the_plain_formula(tiny):
    """The custom VJP equals jax.grad of the naive dense expression."""
    state = em.init(jax.random.key(4), tiny.n_words, tiny.n_docs, T)
    theta = jax.random.dirichlet(jax.random.key(5), jnp.ones(T), (tiny.n_docs,)).T
    dense = jnp.asarray(tiny.to_dense(), jnp.float32)
    naive = lambda p, t: jnp.sum(dense.T * jnp.log(p @ t))  # noqa: E731
    data = layout.prepare(tiny, chunk=8)
    g = jax.grad(estep.log_likelihood, argnums=(0, 1))(state.phi, theta, data)
    g_ref = jax.grad(naive, argnums=(0, 1))(state.phi, theta)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    g_t = jax.grad(estep.log_likelihood_theta, argnums=1)(state.phi, theta, data)
    np.testing.assert_allclose(np.asarray(g_t), np.asarray(g_ref[1]), rtol=1e-4, atol=1e-5)


def test_em_monotone_and_distributions(step):
    corpus, _, _ = datasets.make_bars(n_docs=150, seed=2)
    data = layout.prepare(corpus, chunk=1024)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    lls = []
    for _ in range(30):
        state = step(state, data)
        lls.append(float(state.loglik))
        np.testing.assert_allclose(np.asarray(state.phi.sum(0)), 1.0, atol=1e-5)
        np.testing.assert_allclose(np.asarray(state.theta.sum(0)), 1.0, atol=1e-5)
        assert float(state.phi.min()) >= 0 and float(state.theta.min()) >= 0
    # EM never decreases the likelihood (up to float32 round-off of the compensated sum).
    assert np.all(np.diff(lls) >= -1e-6 * abs(lls[-1]))
    assert lls[-1] > lls[0]


def test_loglik_is_accurate_to_float64(step):
    corpus, _, _ = datasets.make_bars(n_docs=400, seed=5)
    data = layout.prepare(corpus, chunk=256)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    state = step(state, data)
    new = step(state, data)  # new.loglik is L at state's parameters
    exact = metrics.log_likelihood(state.phi, state.theta, corpus)
    assert abs(float(new.loglik) - exact) < 1e-6 * abs(exact)


def test_same_seed_same_result(step):
    corpus, _, _ = datasets.make_bars(n_docs=60, seed=1)
    data = layout.prepare(corpus)

    def fit(seed):
        s = em.init(jax.random.key(seed), corpus.n_words, corpus.n_docs, 10)
        for _ in range(5):
            s = step(s, data)
        return np.asarray(s.phi)

    if jax.default_backend() == "cpu":
        assert np.array_equal(fit(7), fit(7))
    else:  # GPU scatter-adds use atomics: same seed, same model to float round-off (module docs)
        np.testing.assert_allclose(fit(7), fit(7), rtol=1e-4, atol=1e-7)
    assert not np.allclose(fit(7), fit(8), rtol=1e-2)


def test_normalize_columns_zero_column_is_zero_not_nan():
    a = jnp.array([[1.0, -1.0, 0.0], [3.0, -2.0, 0.0]])
    out = np.asarray(mstep.normalize_columns(a))
    np.testing.assert_allclose(out[:, 0], [0.25, 0.75])
    assert np.all(out[:, 1:] == 0) and np.all(np.isfinite(out))
    # per block of rows (one distribution per modality)
    b = np.asarray(mstep.normalize_columns(jnp.array([[1.0], [3.0], [2.0], [2.0]]), jnp.array([0, 0, 1, 1]), 2))
    np.testing.assert_allclose(b[:, 0], [0.25, 0.75, 0.5, 0.5])


def test_regularized_counts_smoothing_limit_at_zero():
    """φ ∂R/∂φ for R = β Σ log φ is β even where φ = 0 (no 0·∞ = NaN): the one clamp convention."""
    corpus = Corpus.from_dense([[1, 2], [3, 0]])
    data = layout.prepare(corpus)
    phi = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    theta = jnp.full((2, 2), 0.5)
    _, _, a_phi, _ = mstep.regularized_counts(lambda p, t: estep.log_likelihood(p, t, data), phi, theta,
                                              lambda p, t: 0.5 * jnp.sum(jnp.log(p)))
    _, g, _ = estep.expected_counts(phi, theta, data)
    np.testing.assert_allclose(np.asarray(a_phi), np.asarray(phi * g) + 0.5, rtol=1e-5, atol=1e-6)


def test_counts_likelihood_gives_back_the_counts():
    """The online algorithm's M-step: x ⊙ ∇L of the counts' likelihood is the counts, at φ = 0 too."""
    n = jnp.array([[2.0, 0.0], [1.0, 3.0]])
    phi = jnp.array([[0.0, 0.5], [1.0, 0.5]])
    _, _, a_phi, _ = mstep.regularized_counts(mstep.counts_likelihood(n), phi, jnp.full((2, 3), 0.5))
    np.testing.assert_allclose(np.asarray(a_phi), np.asarray(n), rtol=1e-6)


def test_infer_theta_recovers_training_theta_with_fixed_phi(step):
    from topicjax.regularizers import as_regularizer

    corpus, _, _ = datasets.make_bars(n_docs=80, seed=3)
    data = layout.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    for _ in range(40):
        state = step(state, data)
    theta = em.infer_theta(state.phi, data, corpus.n_docs, as_regularizer(None), n_iter=200)
    assert metrics.perplexity(state.phi, theta, corpus) <= metrics.perplexity(state.phi, state.theta, corpus) * 1.01


def test_prepare_rejects_empty():
    c = Corpus.from_entries([], [], [], vocab=["a"], n_docs=0)
    with pytest.raises(ValueError, match="no tokens"):
        layout.prepare(c)


# ----------------------------------------------------------------- Notes 1-2, NaN, step memory
def _poisoned(where: str, value: float):
    """A regularizer of value 0 whose gradient is ``value`` (inf, -inf or NaN) in column 1 of Φ
    or of Θ: a non-finite count in one column, the value R itself finite."""

    @jax.custom_jvp
    def r(phi, theta):
        return jnp.zeros((), phi.dtype)

    @r.defjvp
    def _(primals, tangents):
        dx = tangents[0] if where == "phi" else tangents[1]
        return r(*primals), jnp.sum(dx[:, 1]) * value

    return r


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where,cfg", [
    ("phi", em.EMConfig(remove=False)), ("phi", em.EMConfig(remove=True)), ("phi", em.EMConfig(n_segments=2)),
    ("theta", em.EMConfig(remove=True)), ("theta", em.EMConfig(update_phi=False)),
    ("theta", em.EMConfig(doc_passes=2)), ("theta", em.EMConfig(mask_topics=True, remove=False)),
])
def test_a_non_finite_count_is_reported_not_removed(where, cfg, value):
    """A count that is not finite (here from a regularizer's gradient, its value finite) sets
    ``finite`` to False, whatever the step's path: the positive part alone would turn the column
    into zeros, an over-regularized topic or document, and the drivers would go on silently."""
    corpus, _, _ = datasets.make_bars(n_docs=30, seed=0)
    data = layout.prepare(corpus)
    segs = jnp.asarray(np.arange(corpus.n_words) % 2, jnp.int32)
    aux = em.EMAux(segments=segs, active=jnp.array([True, True])) if cfg.n_segments > 1 else None
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 5, aux=aux, n_segments=cfg.n_segments)
    state = em.make_step((_poisoned(where, value), 1.0), cfg=cfg)(state, data, aux)
    assert not bool(state.finite) and not bool(em.health(state, cfg.update_phi)[0])
    clean = em.make_step(cfg=cfg)(em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 5, aux=aux,
                                          n_segments=cfg.n_segments), data, aux)
    assert bool(clean.finite)


def _empties(column: int, of: str, rows=None):
    """A penalty that empties one column of Φ (``of="phi"``, only ``rows`` of it) or one row of Θ
    (``of="theta"``: the topic is used by no document) with a large coefficient."""

    def r(phi, theta):
        if of == "phi":
            x = phi[:, column] if rows is None else phi[rows, column]
        else:
            x = theta[column]
        return -jnp.sum(jnp.log(x))

    return r


@pytest.mark.parametrize("cfg", [em.EMConfig(remove=False), em.EMConfig(remove=True),
                                 em.EMConfig(remove=False, mask_topics=True), em.EMConfig(doc_passes=2)])
def test_overregularized_topics_and_documents_are_flagged(cfg):
    """ARTM Notes 1-2 at the step: an emptied φ column, a θ row that no document uses any more
    and an emptied θ_d are flagged (and removed with ``cfg.remove``); nothing else is."""
    corpus, _, _ = datasets.make_bars(n_docs=30, seed=0)
    data = layout.prepare(corpus)
    T = 5
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)

    def theta_doc(phi, theta):  # empties document 4
        return -jnp.sum(jnp.log(theta[:, 4]))

    regs = [(_empties(2, "phi"), 1e6), (_empties(3, "theta"), 1e6), (theta_doc, 1e6)]
    state = em.make_step(regs, cfg=cfg)(state, data)
    assert bool(state.finite)
    assert np.flatnonzero(np.asarray(state.dead_topics)).tolist() == [2, 3]
    assert np.flatnonzero(np.asarray(state.dead_docs)).tolist() == [4]
    alive_t, alive_d = np.asarray(state.topic_alive), np.asarray(state.doc_alive)
    if cfg.remove:
        assert alive_t.tolist() == [1, 1, 0, 0, 1] and np.flatnonzero(alive_d == 0).tolist() == [4]
        assert np.all(np.asarray(state.theta)[[2, 3]] == 0) and np.all(np.asarray(state.theta)[:, 4] == 0)
    else:
        assert np.all(alive_t == 1) and np.all(alive_d == 1)


@pytest.mark.parametrize("update_phi", [True, False])
def test_overregularized_topic_of_one_modality(update_phi):
    """With modalities, a topic is dead when the block of its column of a counted modality is
    empty; an empty block of a modality that does not count leaves it alive (and with Φ fixed,
    Φ's blocks are never checked)."""
    corpus, _, _ = datasets.make_bars(n_docs=30, seed=0)
    data = layout.prepare(corpus)
    segs = np.arange(corpus.n_words) % 2
    cfg = em.EMConfig(remove=False, n_segments=2, update_phi=update_phi)
    for active, dead in (([True, True], [1]), ([True, False], [])):
        aux = em.EMAux(segments=jnp.asarray(segs, jnp.int32), active=jnp.array(active))
        state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 4, aux=aux, n_segments=2)
        state = em.make_step([(_empties(1, "phi", np.flatnonzero(segs == 1)), 1e6)], cfg=cfg)(state, data, aux)
        assert bool(state.finite)
        assert np.flatnonzero(np.asarray(state.dead_topics)).tolist() == (dead if update_phi else [])


def _synthetic(W, D, length, seed=0):
    rng = np.random.default_rng(seed)
    words = np.concatenate([rng.choice(W, length, replace=False) for _ in range(D)])
    return Corpus.from_entries(np.repeat(np.arange(D), length), words, rng.integers(1, 4, D * length),
                               n_words=W, n_docs=D)


#: the step configurations whose donated step is checked (one test: one child interpreter at XLA's
#: default settings for all of them, and one corpus)
DONATED_CONFIGS = [em.EMConfig(remove=False), em.EMConfig(remove=True), em.EMConfig(remove=True, update_phi=False),
                   em.EMConfig(remove=False, n_segments=2), em.EMConfig(remove=True, doc_passes=2)]


@pytest.mark.user_compiler  # XLA's default settings' memory_analysis
@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's buffer assignment")
def test_donated_step_holds_no_copy_of_phi_and_theta():
    """In a fit's loop the step's state is donated: the new Φ and Θ take the old ones' place.
    The step's temporaries are then the E-step's ∂L/∂Φ and ∂L/∂Θ, the reweighted counts when
    documents are removed and the Θ of the inner passes with ``doc_passes``: no copy of the old
    Φ and Θ, which XLA keeps when a check after the M-step (finiteness, Notes 1-2) re-reads them
    beside the in-place write (the step was 2.14x counts + Φ + Θ on 20 Newsgroups at T = 100
    for that, 1.45x without).

    With the pure-JAX E-step (``TOPICJAX_ESTEP=xla``, the GPU's) the step also holds that
    E-step's temporaries: the rows gathered for one block of pieces (``CPU_BLOCK_ELEMENTS``
    floats, 1.6 MB) and, when Φ is updated, their scatter update into ∂L/∂Φ; and XLA:CPU writes
    the positive part of x ⊙ ∇ for Φ (W x T) into a buffer of its own rather than over the
    loop's ∂L/∂Φ, a buffer that the block temporaries occupy while the loop runs.  So one buffer
    of Φ's size more when Φ is updated, one block of rows when it is not; a copy of the old Φ
    or Θ still exceeds the bound."""
    W, D, T = 20000, 10000, 50  # Φ (4 MB) and Θ (2 MB) dominate the counts (1.3 MB)
    corpus = _synthetic(W, D, 20)
    data = layout.prepare(corpus)
    phi, theta = W * T * 4, T * D * 4
    over = []
    for cfg in DONATED_CONFIGS:
        aux = None
        if cfg.n_segments > 1:
            aux = em.EMAux(segments=jnp.asarray(np.arange(W) % 2, jnp.int32), active=jnp.array([True, True]))
        state = em.init(jax.random.key(0), W, D, T, aux=aux, n_segments=cfg.n_segments)
        step = jax.jit(em.make_step(cfg=cfg, jit=False), donate_argnums=0)
        ma = step.lower(state, data, aux).compile().memory_analysis()
        need = (phi if cfg.update_phi else 0) + theta  # the E-step's outputs
        need += data.count.size * 4 if cfg.remove else 0
        need += theta if cfg.doc_passes else 0
        # the Θ passes' loop reads its own reweighted copy of the counts (O(nnz), not a Φ or Θ)
        need += data.count.size * 4 if cfg.remove and cfg.doc_passes else 0
        if not kernels.use_ffi(jnp.float32):  # the pure-JAX E-step (see above)
            need += phi if cfg.update_phi else estep.CPU_BLOCK_ELEMENTS * 4
        if ma.temp_size_in_bytes > need + phi // 10:
            over.append((cfg, ma.temp_size_in_bytes, need))
    assert not over, over  # every configuration within its bound


def test_reweight_docs_reads_the_pieces_documents():
    """Removing documents reweights the counts from ``piece_doc`` (the step then never holds
    ``doc``): the same products as from every slot's document id."""
    corpus, _, _ = datasets.make_bars(n_docs=40, seed=1)
    w = jnp.asarray(np.random.default_rng(0).random(corpus.n_docs), jnp.float32)
    for chunk in (8, 64, None):
        data = layout.prepare(corpus, chunk=chunk)
        got = layout.reweight_docs(data, w)
        np.testing.assert_array_equal(np.asarray(got.count), np.asarray(data.count * w[data.doc]))
        flat = layout.reweight_docs(data._replace(piece_doc=None), w)
        np.testing.assert_array_equal(np.asarray(flat.count), np.asarray(got.count))
