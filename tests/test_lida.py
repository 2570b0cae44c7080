"""Tests of topicjax.lida: closed forms (eq. 10, 13, 23-24, 29-30, 34, 43), the samplers' invariants,
the exact sampler's stationary distribution against the enumerated LDA posterior, recovery of
planted topics, seeds, save/load and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from scipy import integrate, stats
from scipy.special import betaln, gammaln as g

from topicjax.data.corpus import Corpus
from topicjax.data.datasets import make_bars, make_lda_corpus
from topicjax import lida as L
from topicjax.lida import LIDA

HYPER0 = dict(alpha=0.3, beta=0.2, eta=3.0, delta=1.0, gamma=8.0, xi=1.0)

# jitted once: eager calls would compile every primitive separately
ibp_ll = jax.jit(L.ibp_log_likelihood, static_argnums=(1, 5))
marg_z = jax.jit(L.log_marginal_z)
marg_w = jax.jit(L.log_marginal_w)
topic_lo = jax.jit(L.topic_activation_logodds)
word_lo = jax.jit(L.word_activation_logodds, static_argnames=("zeta", "n_words", "finite"))


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def small():
    corpus, phi = make_bars(n_docs=30, size=3, doc_length=12, alpha=0.5, seed=3)
    return corpus, phi


COMMON = dict(n_components=16, batch_size=64, progress=False, random_state=0)
VARIANT_KW = {"lida": dict(sigma=0.1, zeta=0.25, init_topics=4), "ftm": dict(init_topics=4), "sstm": {}, "lda": {}}


def _est(variant, **kw):
    """Estimators of the small-corpus tests share their settings, hence their compiled sweeps."""
    return LIDA(variant, **{**COMMON, **VARIANT_KW[variant], **kw})


@pytest.fixture(scope="module")
def fitted_lida(small):
    corpus, _ = small
    return _est("lida", max_iter=8, hyper_start=2, eval_every=4).fit(corpus)


@pytest.fixture(scope="module")
def bars():
    return make_bars(n_docs=300, size=5, doc_length=60, alpha=0.5, seed=0)


@pytest.fixture(scope="module")
def lda_bars(bars):
    corpus, _ = bars
    return LIDA("lda", n_components=10, max_iter=120, burn_in=80, random_state=0, progress=False,
                batch_size=4096).fit(corpus)


def _cfg(corpus, variant, mode, K=8, n_phantom=0, vocabulary="finite", mh_steps=4, batch=64, **kw):
    return L.Config(variant=variant, n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                    n_rows=corpus.n_words + n_phantom, n_tokens=corpus.n_tokens, vocabulary=vocabulary,
                    mode=mode, batch=batch, mh_steps=mh_steps, **kw)


def _check_invariants(state, tokens, cfg):
    z, d, w = np.asarray(state.z), np.asarray(tokens.doc), np.asarray(tokens.word)
    K, D, V = cfg.n_topics, cfg.n_docs, cfg.n_rows
    assert z.min() >= 0 and z.max() < K
    n_dk = np.zeros((D, K), np.int64)
    n_wk = np.zeros((V, K), np.int64)
    np.add.at(n_dk, (d, z), 1)
    np.add.at(n_wk, (w, z), 1)
    np.testing.assert_array_equal(np.asarray(state.n_dk), n_dk)
    np.testing.assert_array_equal(np.asarray(state.n_wk), n_wk)
    np.testing.assert_array_equal(np.asarray(state.n_k), np.bincount(z, minlength=K))
    tb, pb = np.asarray(state.theta_bar), np.asarray(state.phi_bar)
    assert np.all(tb[n_dk > 0]), "a topic holding tokens of a document must be active in it (sec. 4.1)"
    assert np.all(pb[n_wk > 0]), "a word holding tokens of a topic must be active in it (sec. 4.2)"
    if not cfg.focused:
        assert tb.all()
    if not cfg.sparse:
        assert pb[: cfg.n_words].all()
    else:
        live = tb.any(0)
        assert not pb[:, ~live].any(), "dead topics keep no words"


# ---------------------------------------------------------------------------- closed forms
def test_log_ratio_add_empty_is_ratio_of_marginals_23():
    """B(mα+n, α)/B(mα, α) equals p(z | m+1 active) / p(z | m active) from eq. (23)."""
    alpha = 0.37
    for m, n in [(1, 5), (3, 17), (7, 1)]:
        # document with n tokens on m active topics (counts arbitrary), plus one empty active topic
        counts = np.random.default_rng(m).multinomial(n, np.ones(m) / m)
        def lm(n_active):
            return g(n_active * alpha) - g(n_active * alpha + n) + np.sum(g(alpha + counts) - g(alpha))
        want = lm(m + 1) - lm(m)
        assert np.isclose(float(L.log_ratio_add_empty(m, n, alpha)), want, rtol=1e-4, atol=1e-5)
        assert np.isclose(want, betaln(m * alpha + n, alpha) - betaln(m * alpha, alpha), rtol=1e-8)
    assert float(L.log_ratio_add_empty(3, 0, alpha)) == 0.0
    assert float(L.log_ratio_add_empty(0, 4, alpha)) > 1e20


def test_topic_activation_matches_eq_29_30():
    D, alpha, eta, delta, sigma = 50, 0.4, 2.5, 1.7, 0.2
    for n_d, m, c in [(30, 2, 5), (8, 1, 1), (100, 6, 40)]:
        r = np.exp(betaln(m * alpha, alpha) - betaln(m * alpha + n_d, alpha))
        pi = 1.0 / (1.0 + r * (D - 1 - c + delta + sigma) / (c - sigma))  # eq. (29)
        lo = float(topic_lo(n_d, m, c, D - 1.0, alpha, eta, delta, sigma))
        assert np.isclose(1 / (1 + np.exp(-lo)), pi, rtol=1e-4)
        # eq. (30) for a topic used by this document only
        ratio = np.exp(betaln(m * alpha, alpha) - betaln(m * alpha + n_d, alpha) + g(D + delta) + g(delta + sigma)
                       - g(1 + delta) - g(D - 1 + delta + sigma))
        pi_new = eta / (eta + ratio)
        lo = float(topic_lo(n_d, m, 0, D - 1.0, alpha, eta, delta, sigma))
        assert np.isclose(1 / (1 + np.exp(-lo)), pi_new, rtol=1e-4)


def test_word_activation_matches_eq_32_33_and_finite_beta_bernoulli():
    K, beta, gamma, xi, zeta, W = 12, 0.05, 6.0, 2.0, 0.25, 40
    n_k, m, c = 30, 5, 3
    r = np.exp(betaln(m * beta, beta) - betaln(m * beta + n_k, beta))
    kappa = 1 / (1 + r * (K - 1 - c + xi + zeta) / (c - zeta))  # eq. (32)
    lo = float(word_lo(n_k, m, c, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=False))
    assert np.isclose(1 / (1 + np.exp(-lo)), kappa, rtol=1e-4)
    ratio = np.exp(betaln(m * beta, beta) - betaln(m * beta + n_k, beta) + g(K + xi) + g(xi + zeta) - g(1 + xi)
                   - g(K - 1 + xi + zeta))
    lo = float(word_lo(n_k, m, 0, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=False))
    assert np.isclose(1 / (1 + np.exp(-lo)), gamma / (gamma + ratio), rtol=1e-4)  # eq. (33)
    # finite vocabulary (34), zeta = 0: the prior part is the beta-Bernoulli predictive of the
    # finite model (16), computed here by quadrature of π against its Beta posterior.
    a = gamma * xi / W
    post = lambda p: p ** (a + c - 1) * (1 - p) ** (xi + (K - 1 - c) - 1)
    p1 = integrate.quad(lambda p: p * post(p), 0, 1)[0] / integrate.quad(post, 0, 1)[0]
    lo = float(word_lo(0, m, c, K, beta, gamma, xi, zeta=0.0, n_words=W, finite=True))
    assert np.isclose(1 / (1 + np.exp(-lo)), p1, rtol=1e-4)


def test_ibp_likelihood_43_one_parameter_closed_form_and_intensity_10():
    D, eta = 20, 2.3
    counts = np.array([1, 4, 20, 7, 0, 2])
    got = float(ibp_ll(counts, D, eta, 1.0, 0.0))
    H = np.sum(1.0 / np.arange(1, D + 1))
    c = counts[counts > 0]
    want = -eta * H + c.size * np.log(eta) + np.sum(g(D - c + 1) + g(c) - g(D + 1))  # Griffiths & Ghahramani
    assert np.isclose(got, want, rtol=1e-5)
    # three-parameter: independent loop over (43)
    delta, sigma = 0.6, 0.3
    j = np.arange(D)
    H3 = np.sum(np.exp(g(1 + delta) + g(j + delta + sigma) - g(j + 1 + delta) - g(delta + sigma)))
    want3 = -eta * H3 + c.size * np.log(eta) + sum(
        g(1 + delta) + g(D - ck + delta + sigma) + g(ck - sigma) - g(1 - sigma) - g(delta + sigma) - g(D + delta)
        for ck in c)
    assert np.isclose(float(ibp_ll(counts, D, eta, delta, sigma)), want3, rtol=1e-5)
    # intensity ε (10): closed forms used for the finite vocabulary vs the direct sum
    for s in (0.0, 0.3):
        direct = eta * np.sum(np.exp(g(1 + delta) + g(j + delta + s) - g(j + 1 + delta) - g(delta + s)))
        assert np.isclose(float(jnp.exp(L._log_ibp_intensity(D, eta, delta, s))), direct, rtol=1e-4)


def test_marginals_23_24_against_loops():
    rng = np.random.default_rng(0)
    n_dk = rng.integers(0, 4, (5, 6))
    tb = (n_dk > 0) | (rng.random((5, 6)) < 0.3)
    alpha = 0.7
    want = 0.0
    for d in range(5):
        m, n = tb[d].sum(), n_dk[d].sum()
        want += g(m * alpha) - g(m * alpha + n)
        want += sum(g(alpha + n_dk[d, k]) - g(alpha) for k in range(6) if tb[d, k])
    assert np.isclose(float(marg_z(jnp.asarray(n_dk), jnp.asarray(tb), alpha)), want, rtol=1e-5)
    n_wk = rng.integers(0, 3, (7, 4))
    M = np.array([7, 7, 7, 7])
    beta = 0.2
    want = sum(g(M[k] * beta) - g(M[k] * beta + n_wk[:, k].sum()) + np.sum(g(beta + n_wk[:, k]) - g(beta))
               for k in range(4))
    got = float(marg_w(jnp.asarray(n_wk), jnp.asarray(n_wk.sum(0)), jnp.asarray(M), beta))
    assert np.isclose(got, want, rtol=1e-5)
    # the histogram form used by the α, β updates
    hist = L._count_histogram(jnp.asarray(n_wk), 8)
    want = np.sum(np.where(n_wk > 0, g(beta + n_wk) - g(beta), 0.0))
    assert np.isclose(float(L._loggamma_sum(hist, beta)), want, rtol=1e-5)


def test_gamma_poisson_and_mcmc_kernels_preserve_their_targets():
    keys = jax.random.split(jax.random.key(5), 4000)
    # each kernel under one jit: eager vmap would compile every primitive on its own
    x = np.asarray(jax.jit(jax.vmap(lambda k: L._gamma(k, 2.5)))(keys))
    assert stats.kstest(x, stats.gamma(2.5).cdf).pvalue > 1e-3
    pois = np.asarray(jax.jit(L._poisson_small)(jax.random.key(1), jnp.full((20000,), 0.7)))
    assert abs(pois.mean() - 0.7) < 0.03 and abs(pois.var() - 0.7) < 0.05
    # one slice / MH update applied to exact N(1, 0.5²) draws must leave them N(1, 0.5²)
    logf = lambda v: -0.5 * ((v - 1.0) / 0.5) ** 2
    x0 = 1.0 + 0.5 * np.random.default_rng(0).standard_normal(4000).astype(np.float32)
    xs = np.asarray(jax.jit(jax.vmap(lambda k, v: L._slice_log(k, v, logf)))(keys, jnp.asarray(x0)))
    xm = np.asarray(jax.jit(jax.vmap(lambda k, v: L._mh_log(k, v, logf, 0.5, 3)))(keys, jnp.asarray(x0)))
    for y in (xs, xm):
        assert stats.kstest(y, stats.norm(1.0, 0.5).cdf).pvalue > 1e-3
        assert np.mean(y != x0) > 0.3  # the kernels move


# ---------------------------------------------------------------------------- samplers
@pytest.mark.parametrize("variant,mode", [("lda", "parallel"), ("ftm", "parallel"), ("sstm", "parallel"),
                                          ("lida", "parallel"), ("lida", "exact")])
def test_counts_equal_assignments_after_every_sweep(small, variant, mode):
    """Both modes, all variants (the exact sweep with the infinite vocabulary: phantom words)."""
    corpus, _ = small
    tokens = L.make_tokens(corpus)
    vocab = "infinite" if mode == "exact" else "finite"
    n_phantom = 8 if vocab == "infinite" else 0
    cfg = _est(variant, mode=mode, vocabulary=vocab)._config(corpus, 16, corpus.n_words + n_phantom)
    state = L.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4 if cfg.focused else cfg.n_topics)
    _check_invariants(state, tokens, cfg)
    for it in range(2):
        state = L.sweep(state, jax.random.key(it + 1), tokens, cfg)
        assert int(state.overflow_topics) == 0 and int(state.overflow_words) == 0
        _check_invariants(state, tokens, cfg)
        # the hyperparameter step does not depend on the mode, and LIDA's samples all six
        # hyperparameters (LDA's is compiled for ``test_seeds_reproduce`` anyway): compile time
        if mode == "exact" or variant in ("ftm", "sstm"):
            continue
        state = L.hyper_update(state, jax.random.key(100 + it), cfg)
        hv = {h: float(getattr(state, h)) for h in L.HYPER}
        assert all(np.isfinite(v) for v in hv.values())
        assert min(hv["alpha"], hv["beta"], hv["eta"], hv["gamma"]) > 0
        assert hv["delta"] > -cfg.sigma and hv["xi"] > -cfg.zeta
    if cfg.focused:  # births happen and use free slots
        assert np.asarray(state.theta_bar).any(0).sum() >= 1


def test_topic_births_follow_eq_30_poisson_rates(small):
    """Births of new topics (Algorithm 1, eq. 30) against a hand-written computation of their rates.

    Over many independent topic steps from one state, every document d draws Poisson(π̃_d) new topics
    with π̃_d = λ r_d / (1 + λ r_d), λ = η Γ(1+δ) Γ(D−1+δ+σ) / (Γ(D+δ) Γ(δ+σ)) and
    r_d = B(m_d α + n_d, α) / B(m_d α, α), m_d = the document's active topics after the activation
    scan.  A newborn is an active entry in a slot that was dead before the step: it must hold no
    tokens and be active in its document only.  The summed births are compared with the summed
    hand-computed rates (z-score with the Poisson variance), per document and in total."""
    corpus, _ = small
    tokens = L.make_tokens(corpus)
    cfg = _est("ftm")._config(corpus, 16, corpus.n_words)
    hyper = dict(HYPER0, alpha=0.4, eta=1.5, delta=2.0)
    state = L.init_state(jax.random.key(0), tokens, cfg, hyper, 4)
    state = state._replace(delta=jnp.float32(2.0))
    n_keys = 3000
    step = jax.jit(jax.vmap(lambda k: L._topic_step(k, state, tokens, cfg)))
    tb, overflow = step(jax.random.split(jax.random.key(3), n_keys))
    tb, overflow = np.asarray(tb), np.asarray(overflow)
    assert overflow.max() == 0
    dead = ~np.asarray(state.theta_bar).any(0)
    born = tb & dead[None, None, :]  # (keys, D, K)
    assert np.all(born.sum(1) <= 1), "a newborn topic is active in one document only"
    assert not np.any(born & (np.asarray(state.n_dk)[None] > 0))
    # hand-written eq. (30) from the post-scan number of active topics of each document
    D = corpus.n_docs
    eta, delta, sigma, alpha = 1.5, 2.0, cfg.sigma, 0.4
    lam = eta * np.exp(g(1 + delta) + g(D - 1 + delta + sigma) - g(D + delta) - g(delta + sigma))
    m = (tb & ~dead[None, None, :]).sum(2)
    n_d = corpus.doc_lengths[None, :]
    r = np.exp(betaln(m * alpha + n_d, alpha) - betaln(m * alpha, alpha))
    rate = lam * r / (1 + lam * r)
    births = born.sum(2)
    assert births.sum() > 500  # enough events for the test to have power
    z_total = (births.sum() - rate.sum()) / np.sqrt(rate.sum())
    assert abs(z_total) < 4, z_total
    z_doc = (births.sum(0) - rate.sum(0)) / np.sqrt(rate.sum(0))
    assert np.max(np.abs(z_doc)) < 4.5, z_doc
    # the per-document spread is Poisson (variance = mean), not e.g. a Bernoulli of the total
    assert abs(births.var() / births.mean() - 1) < 0.15


def test_ibp_sample_expected_features_10_and_row_mass():
    """Draws of the three-parameter IBP (sec. 2.1): the number of features has mean ε of eq. (10)
    (direct sum in numpy) and every customer has η features on average."""
    D, eta, delta, sigma = 12, 2.5, 1.5, 0.3
    rng = np.random.default_rng(0)
    draws = [L.ibp_sample(rng, D, eta, delta, sigma) for _ in range(1500)]
    j = np.arange(D)
    eps = eta * np.sum(np.exp(g(1 + delta) + g(j + delta + sigma) - g(j + 1 + delta) - g(delta + sigma)))
    k_star = np.array([Z.shape[1] for Z in draws])
    assert abs(k_star.mean() - eps) < 4 * k_star.std() / np.sqrt(k_star.size), (k_star.mean(), eps)
    rows = np.array([Z.sum() / D for Z in draws])  # rows of one draw are dependent: average per draw
    assert abs(rows.mean() - eta) < 4 * rows.std() / np.sqrt(rows.size), (rows.mean(), eta)
    assert all(Z.any(0).all() for Z in draws)  # every feature has a customer
    with pytest.raises(ValueError, match="IBP parameters"):
        L.ibp_sample(rng, D, eta, -0.5, sigma)
    assert L.ibp_sample(rng, 30, 0.05, 1.0, 0.0, min_features=1).sum(1).min() == 1


def test_init_from_ibp_prior(small):
    """init="ibp": Θ̄ is an IBP draw, every token takes one of its document's topics."""
    corpus, _ = small
    tokens = L.make_tokens(corpus)
    cfg = _est("lida")._config(corpus, 16, corpus.n_words)
    Z = L.ibp_sample(np.random.default_rng(1), corpus.n_docs, 2.0, 1.0, 0.1, min_features=1)
    theta0 = np.pad(Z, ((0, 0), (0, 16 - Z.shape[1])))
    state = L.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4, theta0)
    _check_invariants(state, tokens, cfg)
    z, d = np.asarray(state.z), np.asarray(tokens.doc)
    assert theta0[d, z].all()
    np.testing.assert_array_equal(np.asarray(state.theta_bar), theta0)  # n_d >= topics here
    state = L.sweep(state, jax.random.key(1), tokens, cfg)
    _check_invariants(state, tokens, cfg)
    with pytest.raises(ValueError, match="document 0 has tokens but no active topic"):
        L.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4, np.zeros_like(theta0))
    # through the estimator: same settings as ``fitted_lida`` (shared compilations)
    m = _est("lida", init="ibp", eta=1.0, max_iter=3, hyper_start=2, eval_every=0).fit(corpus)
    assert m.n_components_ == 16 and m.n_topics_ >= 1
    with pytest.raises(ValueError, match="init must be"):
        _est("lida", init="sparse").fit(corpus)
    with pytest.raises(ValueError, match="drew .* topics, more than n_components=16"):
        _est("ftm", init="ibp", eta=40.0, grow="error", max_iter=1).fit(corpus)


def _chi2_against(samples, Z, p):
    index = {tuple(z): i for i, z in enumerate(Z)}
    obs = np.bincount([index[tuple(s)] for s in samples], minlength=len(Z)).astype(float)
    exp = p * len(samples)
    big = exp >= 5
    o = np.append(obs[big], obs[~big].sum())
    e = np.append(exp[big], exp[~big].sum())
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    return stats.chisquare(o, e).pvalue


@pytest.mark.parametrize("mode,mh_steps", [("exact", 0), ("parallel", 4), ("parallel", 0)])
def test_stationary_distribution_matches_enumerated_lda_posterior(mode, mh_steps):
    """Independent chains of the sampler, each run for 12 sweeps, against p(z | w) enumerated over all
    K^N assignments (chi-square, fixed seed).  The parallel sweep with one token per batch is a
    sequential sampler too: with ``mh_steps=4`` this checks the MH proposal densities (a wrong q
    changes the stationary distribution), with 0 the dense categorical."""
    corpus = Corpus.from_entries([0, 0, 1, 1], [0, 1, 1, 2], [2, 1, 1, 1], n_words=3)
    K, alpha, beta = 2, 0.5, 0.3
    tokens = L.make_tokens(corpus)
    Z, p = L.enumerate_lda_posterior(tokens.doc, tokens.word, K, 3, alpha, beta)
    cfg = _cfg(corpus, "lda", mode, K=K, mh_steps=mh_steps, batch=1, sample=())
    hyper = dict(HYPER0, alpha=alpha, beta=beta)
    n_chains = 6000
    keys = jax.random.split(jax.random.key(11), n_chains)
    states = jax.vmap(lambda k: L.init_state(k, tokens, cfg, hyper, K))(keys)

    def run(state, key):
        state = jax.lax.fori_loop(0, 12, lambda i, s: L.sweep(s, jax.random.fold_in(key, i), tokens, cfg), state)
        return state.z

    zs = np.asarray(jax.jit(jax.vmap(run))(states, jax.random.split(jax.random.key(12), n_chains)))
    assert _chi2_against(zs, Z, p) > 1e-3
    # the test has power: the prior-only (uniform) distribution is rejected
    assert stats.chisquare(np.bincount([int("".join(map(str, z)), 2) for z in zs], minlength=len(Z)),
                           np.full(len(Z), n_chains / len(Z))).pvalue < 1e-6


def test_lda_recovers_planted_bars(bars, lda_bars):
    _, true_phi = bars
    model = lda_bars
    assert model.phi_.shape == (25, 10) and model.theta_.shape == (10, 300)
    np.testing.assert_allclose(model.phi_.sum(0), 1.0, rtol=1e-4)
    np.testing.assert_allclose(model.theta_.sum(0), 1.0, rtol=1e-6)
    dist = np.abs(true_phi[:, :, None] - model.phi_[:, None, :]).sum(0)  # L1, true x learned
    best = dist.min(1)
    assert np.all(best < 0.35), best
    assert len(set(dist.argmin(1))) == 10  # one learned topic per bar
    assert model.hyper_["alpha"] > 0 and len(model.hyper_trace_["alpha"]) == 120


def test_perplexity_document_completion_and_summaries(bars, lda_bars):
    corpus, true_phi = bars
    model = lda_bars
    test, _ = make_bars(n_docs=40, size=5, doc_length=60, alpha=0.5, seed=7)
    perp = model.perplexity(test)
    # planted model: 5 active pixels per bar, ~2 bars per document, so far below the 25 of uniform
    # oracle: the planted Φ and Θ of the test documents on the same held-out half
    test_true, theta_true = make_lda_corpus(true_phi, 40, doc_length=60, alpha=0.5, seed=7)
    obs, held = test_true.completion_split("tokens", seed=0)
    p = np.einsum("nk,kn->n", true_phi[held.word_ids], theta_true[:, held.doc_ids])
    oracle = np.exp(-np.sum(held.counts * np.log(p)) / held.n_tokens)
    assert perp < 1.15 * oracle < 25.0, (perp, oracle)
    observed, held = test.completion_split("tokens", seed=0)
    ll, n = model.log_predictive(observed, held)
    assert n == held.n_tokens and np.isclose(np.exp(-ll / n), perp)
    theta = model.transform(test)
    assert theta.shape == (40, 10) and np.allclose(theta.sum(1), 1.0)
    assert np.all(model.topics_per_document() == 10)  # LDA: every topic in every document
    assert model.histogram(model.topics_per_word()).sum() == 25
    assert model.documents_per_topic().shape == (10,) and model.words_per_topic().shape == (10,)
    assert any("log_likelihood" in h for h in model.history_)


def test_growth_auto_and_error(small):
    corpus, _ = small
    kw = dict(init_topics=16, eta=1e4, max_iter=1, hyper_start=1, eval_every=0)
    ftm = _est("ftm", **kw).fit(corpus)
    assert ftm.n_components_ > 16  # births found no free slot: K_max was grown (grow="auto")
    _check_invariants(ftm.state_, ftm.tokens_, ftm.config_)
    assert ftm.n_topics_ > 16 and ftm.phi_.shape == (corpus.n_words, ftm.n_topics_)
    with pytest.raises(ValueError, match="sweep 0: .* no free slot among K_max=16"):
        _est("ftm", grow="error", **kw).fit(corpus)


def test_lida_fit_evaluate_and_summaries(small, fitted_lida):
    corpus, _ = small
    lida = fitted_lida
    assert np.isfinite(lida.perplexity(corpus))
    T = lida.n_topics_
    assert lida.phi_bar_.shape == (corpus.n_words, T) and lida.theta_bar_.shape == (T, corpus.n_docs)
    assert np.all(lida.phi_ > 0)  # Rao-Blackwellised (47): every word keeps a positive probability
    np.testing.assert_allclose(lida.phi_.sum(0), 1.0, rtol=1e-6)  # finite vocabulary
    np.testing.assert_array_equal(lida.topics_per_document(), lida.theta_bar_.sum(0))
    assert lida.histogram(lida.topics_per_word()).sum() == corpus.n_words
    assert lida.documents_per_topic().sum() == lida.theta_bar_.sum() == lida.topics_per_document().sum()
    assert lida.words_per_topic().min() >= 1  # finite vocabulary: at least one word per topic
    assert set(lida.hyper_trace_) == set(L.HYPER) and len(lida.hyper_trace_["gamma"]) == 8
    assert lida.hyper_trace_["gamma"][0] == 50.0 and lida.hyper_trace_["gamma"][-1] != 50.0  # hyper_start=2


def test_seeds_reproduce(small):
    corpus, _ = small
    a = _est("lda", random_state=3, max_iter=6).fit(corpus)
    b = _est("lda", random_state=3, max_iter=6).fit(corpus)
    c = _est("lda", random_state=4, max_iter=6).fit(corpus)
    np.testing.assert_array_equal(a.phi_, b.phi_)
    assert a.hyper_trace_ == b.hyper_trace_
    assert not np.array_equal(a.phi_, c.phi_)


def test_save_load_round_trip(tmp_path, small, fitted_lida):
    corpus, _ = small
    m = fitted_lida
    m.save(tmp_path / "m")
    m2 = LIDA.load(tmp_path / "m")
    for name in LIDA._saved_arrays:
        np.testing.assert_array_equal(getattr(m, name), getattr(m2, name))
    assert m2.hyper_ == m.hyper_ and m2.get_params() == m.get_params()
    assert m2.hyper_trace_ == m.hyper_trace_ and m2.history_ == m.history_
    assert m2.perplexity(corpus) == m.perplexity(corpus)


def test_bad_input(small):
    corpus, _ = small
    fit = lambda **kw: LIDA(**{"progress": False, "max_iter": 2, **kw}).fit(corpus)
    with pytest.raises(ValueError, match="n_components"):
        fit(n_components=0)
    with pytest.raises(ValueError, match="unknown variant 'hdp'"):
        fit(variant="hdp")
    with pytest.raises(ValueError, match="mode must be"):
        fit(mode="fast")
    with pytest.raises(ValueError, match="sigma"):
        fit(sigma=1.0)
    with pytest.raises(ValueError, match="delta must be > -sigma"):
        fit(delta=-0.5, sigma=0.2)
    with pytest.raises(ValueError, match="fixed_hyper: unknown hyperparameter 'tau'"):
        fit(fixed_hyper=("tau",))
    with pytest.raises(ValueError, match="alpha must be a positive"):
        fit(alpha=0.0)
    with pytest.raises(ValueError, match="vocabulary must be"):
        fit(vocabulary="open")
    with pytest.raises(ValueError, match="not fitted"):
        LIDA().perplexity(corpus)
    with pytest.raises(ValueError, match="topics is more than"):
        LIDA("lda", n_components=10_000, progress=False).fit(corpus)
