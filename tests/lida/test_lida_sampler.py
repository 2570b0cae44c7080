"""Sweeps of topicjax.lida: count/mask invariants in every mode and variant, topic births against
eq. (30), the first word of a newborn topic, initialisation from the IBP prior, and the exact
sweep's stationary distribution against the enumerated LDA posterior."""

from __future__ import annotations

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from scipy import stats
from scipy.special import betaln, gammaln as g

from topicjax.data.corpus import Corpus
from topicjax.lida import evaluate as lida_evaluate, hyper as lida_hyper, ibp
from topicjax.lida import sampler as lida_sampler, state as lida_state
from topicjax.lida.masks import diagonal_scan, topic_step

from .common import HYPER0, check_invariants, est


@pytest.mark.parametrize("variant,mode", [("lda", "parallel"), ("ftm", "parallel"), ("sstm", "parallel"),
                                          ("lida", "parallel"), ("lida", "exact"), ("lda", "stale")])
def test_counts_equal_assignments_after_every_sweep(small, variant, mode):
    """Every mode and variant (the exact sweep with the infinite vocabulary: phantom words): counts
    equal the assignments after every sweep, masks cover the counts, and every topic alive after a
    sweep was alive before it or is a newborn of eq. (30): active in exactly one document and
    holding tokens of that document only."""
    corpus, _ = small
    tokens = lida_state.make_tokens(corpus, block_tokens=64)
    vocab = "infinite" if mode == "exact" else "finite"
    n_phantom = 8 if vocab == "infinite" else 0
    cfg = est(variant, sampler=mode, vocabulary=vocab)._config(corpus, 16, corpus.n_words + n_phantom)
    state = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4 if cfg.focused else cfg.n_topics)
    check_invariants(state, tokens, cfg)
    for it in range(2):
        live0 = np.asarray(state.theta_bar).any(0)
        state = lida_sampler.sweep(state, jax.random.key(it + 1), tokens, cfg)
        assert int(state.overflow_topics) == 0 and int(state.overflow_words) == 0
        check_invariants(state, tokens, cfg)
        if cfg.focused:
            tb = np.asarray(state.theta_bar)
            born = tb.any(0) & ~live0
            assert np.all(tb[:, born].sum(0) == 1)
            n_dk = np.asarray(state.n_dk)
            assert np.all((n_dk[:, born] > 0) <= tb[:, born])
        # the hyperparameter step does not depend on the mode, and LIDA's samples all six
        # hyperparameters (LDA's is compiled by the model tests anyway): compile time
        if mode != "parallel" or variant in ("ftm", "sstm"):
            continue
        state = lida_hyper.hyper_update(state, jax.random.key(100 + it), cfg)
        hv = {h: float(getattr(state, h)) for h in lida_state.HYPER}
        assert all(np.isfinite(v) for v in hv.values())
        assert min(hv["alpha"], hv["beta"], hv["eta"], hv["gamma"]) > 0
        assert hv["delta"] > -cfg.sigma and hv["xi"] > -cfg.zeta


def test_topic_births_follow_eq_30_poisson_rates(small):
    """Births of new topics (Algorithm 1, eq. 30) against a hand-written computation of their rates.

    Over many independent topic steps from one state, every document d draws Poisson(π̃_d) new topics
    with π̃_d = λ r_d / (1 + λ r_d), λ = η Γ(1+δ) Γ(D−1+δ+σ) / (Γ(D+δ) Γ(δ+σ)) and
    r_d = B(m_d α + n_d, α) / B(m_d α, α), m_d = the document's active topics after the activation
    scan.  A newborn is an active entry in a slot that was dead before the step: it must hold no
    tokens and be active in its document only.  The summed births are compared with the summed
    hand-computed rates (z-score with the Poisson variance), per document and in total.  (1000
    steps: the per-document rates are about 0.037, the 30,000 document draws' variance-to-mean
    ratio has a standard error of about 0.03, so its bound of 0.15 is 5 of them.)"""
    corpus, _ = small
    tokens = lida_state.make_tokens(corpus)
    cfg = est("ftm")._config(corpus, 16, corpus.n_words)
    hyper = dict(HYPER0, alpha=0.4, eta=1.5, delta=2.0)
    state = lida_state.init_state(jax.random.key(0), tokens, cfg, hyper, 4)
    state = state._replace(delta=jnp.float32(2.0))
    # 1000 steps give about 1100 births (the power check below); one step after the other
    # (lax.map): vmapped, the batched cond of the scan's cache refresh runs both of its branches
    # (1.5x the time at the suite's -O0)
    n_keys = 1000
    step = jax.jit(lambda keys: jax.lax.map(lambda k: topic_step(k, state, tokens, cfg), keys))
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


def test_newborn_topic_first_word_is_not_its_slot():
    """Finite vocabulary: a newborn topic has no active word and its first visited entry is forced
    on (sec. 4.2, "assign at least one vocabulary word to every topic").  With the diagonals always
    visited from offset 0 a topic born in slot s started with word s every time; they are now
    visited from a random offset.  Here the scan of ``word_step`` (rows = topics, columns = words)
    with every entry's odds at 0 probability and "empty row: forced on": the forced column of row s
    is uniform over the columns."""
    R, C, s = 6, 11, 4
    mask = jnp.zeros((R, C), bool)
    zeros = jnp.zeros((R,), jnp.int32), jnp.zeros((C,), jnp.int32)
    scan = jax.jit(jax.vmap(lambda k: diagonal_scan(
        k, mask, *zeros, lambda r, m: jnp.full(r.shape, -1e30), lambda c, n: jnp.zeros(c.shape),
        lambda r, c, m: m == 0,
        lambda r, c, n: jnp.ones(r.shape, bool))[0]))
    out = np.asarray(scan(jax.random.split(jax.random.key(1), 2200)))
    assert np.all(out.sum(2) == 1)  # exactly the forced entry in every row
    first = out[:, s].argmax(1)
    assert np.mean(first == s) < 0.2
    assert stats.chisquare(np.bincount(first, minlength=C)).pvalue > 1e-3


def test_init_from_ibp_prior(small):
    """init="ibp": Θ̄ is an IBP draw, every token takes one of its document's topics."""
    corpus, _ = small
    # the blocks of the estimators here (tokens_per_block=64): the sweep compiled for
    # test_counts_equal_assignments[lida-parallel]
    tokens = lida_state.make_tokens(corpus, block_tokens=64)
    cfg = est("lida")._config(corpus, 16, corpus.n_words)
    Z = ibp.ibp_sample(np.random.default_rng(1), corpus.n_docs, 2.0, 1.0, 0.1, min_features=1)
    theta0 = np.pad(Z, ((0, 0), (0, 16 - Z.shape[1])))
    state = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4, theta0)
    check_invariants(state, tokens, cfg)
    z, d = np.asarray(state.z), np.asarray(tokens.doc)
    assert theta0[d, z].all()
    np.testing.assert_array_equal(np.asarray(state.theta_bar), theta0)  # n_d >= topics here
    state = lida_sampler.sweep(state, jax.random.key(1), tokens, cfg)
    check_invariants(state, tokens, cfg)
    with pytest.raises(ValueError, match="document 0 has tokens but no active topic"):
        lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER0, 4, np.zeros_like(theta0))
    # through the estimator (64 topics: with 16 its births outgrow K_max and the fit compiles its programs twice)
    m = est("lida", init="ibp", eta=1.0, max_iter=2, hyper_start=2, eval_every=0, n_components=64).fit(corpus)
    assert m.n_components_ == 64 and m.n_topics_ >= 1 and m.theta_bar_.any(1).all()
    with pytest.raises(ValueError, match="init must be"):
        est("lida", init="sparse").fit(corpus)
    with pytest.raises(ValueError, match="drew .* topics, more than n_components=16"):
        est("ftm", init="ibp", eta=40.0, grow="error", max_iter=1).fit(corpus)


def test_exact_sweep_stationary_distribution_is_the_enumerated_lda_posterior():
    """Independent chains of the exact sequential sweep, 12 sweeps each, against p(z | w)
    enumerated over all K^N assignments (``lida_evaluate.enumerate_lda_posterior``, chi-square, fixed seed)."""
    corpus = Corpus.from_entries([0, 0, 1, 1], [0, 1, 1, 2], [2, 1, 1, 1], n_words=3)
    K, alpha, beta = 2, 0.5, 0.3
    tokens = lida_state.make_tokens(corpus)
    Z, p = lida_evaluate.enumerate_lda_posterior(tokens.doc, tokens.word, K, 3, alpha, beta)
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=2, n_words=3, n_rows=3, n_tokens=5, mode="exact", sample=())
    hyper = dict(HYPER0, alpha=alpha, beta=beta)
    n_chains = 6000
    keys = jax.random.split(jax.random.key(11), n_chains)
    states = jax.vmap(lambda k: lida_state.init_state(k, tokens, cfg, hyper, K))(keys)

    def run(state, key):
        state = jax.lax.fori_loop(0, 12, lambda i, s: lida_sampler.sweep(s, jax.random.fold_in(key, i), tokens, cfg), state)
        return state.z

    zs = np.asarray(jax.jit(jax.vmap(run))(states, jax.random.split(jax.random.key(12), n_chains)))
    index = {tuple(z): i for i, z in enumerate(Z)}
    obs = np.bincount([index[tuple(s)] for s in zs], minlength=len(Z))
    assert stats.chisquare(obs, p * n_chains).pvalue > 1e-3
    # the test has power: the prior-only (uniform) distribution is rejected
    assert stats.chisquare(obs, np.full(len(Z), n_chains / len(Z))).pvalue < 1e-6
