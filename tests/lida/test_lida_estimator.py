"""The LIDA estimator under the shared contract: the per-sweep objective against eq. (24) written
out with scipy, the proportions of a document without tokens against an enumeration, ``fit_many``
against a loop of separate fits, ``random_state`` forms, and ``load`` refusing bad fields."""

from __future__ import annotations

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gammaln

import topicjax as tj
from topicjax.lida import LIDA
from topicjax.lida.evaluate import collapsed_loglik, no_evidence
from topicjax.lida.state import init_state, make_tokens
from topicjax.persistence import SavedModelError

from .common import HYPER0, est


def _collapsed_by_hand(state, sparse: bool, W: int) -> float:
    """eq. (24) with Φ integrated out, topic by topic in float64 (Dirichlet-multinomial of each
    topic over its active words, total concentration φ̄_·k β or W β)."""
    n_wk = np.asarray(state.n_wk, np.float64)
    pb = np.asarray(state.phi_bar)
    beta = float(state.beta)
    total = 0.0
    for k in range(n_wk.shape[1]):
        n_k = n_wk[:, k].sum()
        if n_k == 0:
            continue
        B = pb[:, k].sum() * beta if sparse else W * beta
        total += gammaln(B) - gammaln(B + n_k)
        for v in range(n_wk.shape[0]):
            if n_wk[v, k] > 0:
                assert not sparse or pb[v, k], "a word with tokens in a topic is active in it"
                total += gammaln(beta + n_wk[v, k]) - gammaln(beta)
    return total


@pytest.mark.parametrize("variant", ["lda", "lida"])
def test_objective_is_the_collapsed_likelihood_of_the_sample(small, variant):
    """The history's objective is :func:`collapsed_loglik` of the last sample, recorded every sweep;
    that function is eq. (24) written out (below, at the suite's -O0 to 1e-3: its float32
    log-gamma is 1.7e-4 off there; to 1e-5 at XLA's default settings in
    test_collapsed_loglik_is_eq_24_written_out)."""
    corpus, _ = small
    m = est(variant, max_iter=3, hyper_start=1, eval_every=2).fit(corpus)
    got = collapsed_loglik(m.state_, m.config_)
    assert got == pytest.approx(_collapsed_by_hand(m.state_, variant == "lida", corpus.n_words), rel=1e-3)
    assert m.history_[-1]["objective"] == pytest.approx(got, rel=1e-6)  # the last record: the last sample
    assert [h["iteration"] for h in m.history_] == [1, 2, 3]
    assert ["log_likelihood" in h for h in m.history_] == [False, True, True]  # every 2nd and the last
    assert all(isinstance(h["objective"], float) and h["objective"] < 0 for h in m.history_)


@pytest.mark.user_compiler  # float32 rounding of XLA's default settings
def test_collapsed_loglik_is_eq_24_written_out(small):
    """:func:`collapsed_loglik` against eq. (24) in float64 to 1e-5 (a child interpreter at XLA's
    default settings: the suite's -O0 rounds float32 log-gamma 1.7e-4 off), for a sample of each
    reading: W β (LDA) and φ̄_·k β (LIDA, with words active beyond those holding tokens).  The
    samples are the chain's start (no fit: the child compiles little), its tokens on 4 of 16 slots."""
    corpus, _ = small
    tokens = make_tokens(corpus)
    rng = np.random.default_rng(0)
    for variant in ("lda", "lida"):
        cfg = est(variant)._config(corpus, 16, corpus.n_words)
        st = init_state(jax.random.key(0), tokens, cfg, HYPER0, 4)
        if variant == "lida":
            st = st._replace(phi_bar=st.phi_bar | jnp.asarray(rng.random(st.phi_bar.shape) < 0.3))
        want = _collapsed_by_hand(st, variant == "lida", corpus.n_words)
        assert collapsed_loglik(st, cfg) == pytest.approx(want, rel=1e-5), variant


def test_no_evidence_against_enumerated_topic_sets():
    """E[θ̄_k / Σθ̄ | Σθ̄ >= 1] with independent θ̄_k ~ Bernoulli((c_k − σ)/(D + δ)), by summing
    over all 2^T topic sets."""
    rng = np.random.default_rng(0)
    for T in (1, 2, 5, 8):
        D, delta, sigma = 9, 0.7, 0.3
        c = rng.integers(1, D + 1, T)
        p = (c - sigma) / (D + delta)
        num, mass = np.zeros(T), 0.0
        for b in itertools.product([0, 1], repeat=T):
            b = np.array(b)
            if b.sum():
                w = np.prod(np.where(b, p, 1 - p))
                num += w * b / b.sum()
                mass += w
        np.testing.assert_allclose(no_evidence(c, D, delta, sigma, True), num / mass, rtol=1e-10)
    np.testing.assert_allclose(no_evidence([3, 1, 2], 5, 1.0, 0.0, False), np.full(3, 1 / 3))


def test_no_evidence_at_many_topics_is_finite_and_a_distribution():
    c = np.random.default_rng(1).integers(1, 5, 3000)
    out = no_evidence(c, 3430, 1.0, 0.0, True)
    assert np.all(np.isfinite(out)) and np.all(out > 0) and out.sum() == pytest.approx(1.0)
    assert np.all(np.diff(out[np.argsort(c)]) >= -1e-15)  # more documents, more weight


def test_transform_of_an_empty_document(small, fitted_lida):
    corpus, _ = small
    X = corpus.to_sparse().toarray()[:4]
    X[1] = 0
    out = fitted_lida.transform(X)
    np.testing.assert_allclose(out[1], no_evidence(fitted_lida.doc_freq_, corpus.n_docs, fitted_lida.hyper_["delta"],
                                                   fitted_lida.hyper_["sigma"], True), rtol=1e-12)
    np.testing.assert_array_equal(out[[0, 2, 3]], fitted_lida.transform(X[[0, 2, 3]]))
    assert fitted_lida.transform(X, empty_docs="drop").shape == (3, fitted_lida.phi_.shape[1])


@pytest.mark.parametrize("variant", ["lda", "ftm"])
def test_fit_many_equals_a_loop_of_fits(small, variant):
    corpus, _ = small
    # eval_every=4 (the last sweep), as the other fits of these shapes: the same compiled programs
    base = est(variant, max_iter=4, hyper_start=2, eval_every=4)
    seeds, alphas = [5, 9, 5], [0.3, 0.3, 0.1]
    models = base.fit_many(corpus, seeds=seeds, params={"alpha": alphas})
    assert [(m.random_state, m.alpha) for m in models] == list(zip(seeds, alphas))
    for m, s, a in zip(models, seeds, alphas):
        alone = est(variant, max_iter=4, hyper_start=2, eval_every=4, random_state=s, alpha=a).fit(corpus)
        np.testing.assert_array_equal(m.phi_, alone.phi_)
        np.testing.assert_array_equal(m.theta_bar_, alone.theta_bar_)
        assert m.hyper_trace_ == alone.hyper_trace_
        assert [h["objective"] for h in m.history_] == [h["objective"] for h in alone.history_]
        assert m.history_[-1]["log_likelihood"] == alone.history_[-1]["log_likelihood"]
    assert not np.array_equal(models[0].phi_, models[2].phi_)  # another α: another chain
    threaded = base.fit_many(corpus, seeds=seeds[:2], params={"alpha": alphas[:2]}, mode="threads", workers=2)
    for a, b in zip(threaded, models[:2]):
        np.testing.assert_array_equal(a.phi_, b.phi_)


def test_fit_many_validates_first(small):
    corpus, _ = small
    with pytest.raises(ValueError, match=r"^delta must be > -sigma"):
        est("lida", delta=-0.5, sigma=0.2).fit_many(corpus, seeds=[0, 1])
    with pytest.raises(ValueError, match=r"^seeds must hold integers >= 0"):
        est("lda").fit_many(corpus, seeds=[0, -1])


def test_random_state_none_and_key(small):
    corpus, _ = small
    a = est("ftm", max_iter=2, random_state=None, init="ibp", eta=2.0).fit(corpus)
    assert isinstance(a.seed_, int)
    b = est("ftm", max_iter=2, random_state=a.seed_, init="ibp", eta=2.0).fit(corpus)
    np.testing.assert_array_equal(a.phi_, b.phi_)
    c = est("ftm", max_iter=2, random_state=jax.random.key(a.seed_), init="ibp", eta=2.0).fit(corpus)
    np.testing.assert_array_equal(a.phi_, c.phi_)
    assert a.transform_seed_ == b.transform_seed_ == c.transform_seed_


@pytest.mark.parametrize("field, value, message", [
    ("n_topics_", 999, r"meta.json field 'n_topics_' is 999, but the arrays hold"),
    ("n_train_docs_", 7, r"meta.json field 'n_train_docs_' is 7, but the arrays hold 30"),
    ("hyper_", {"alpha": 0.1}, r"meta.json field 'hyper_' must map"),
    ("hyper_trace_", None, r"meta.json field 'hyper_trace_' must map"),
    ("transform_seed_", -1, r"meta.json field 'transform_seed_' must be a non-negative integer"),
    ("history_", 3, r"meta.json field 'history_' must be a list of records"),
])
def test_load_names_the_bad_field(tmp_path, fitted_lida, field, value, message):
    fitted_lida.save(tmp_path / "m")
    meta_file = tmp_path / "m" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta[field] = value
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(SavedModelError, match=message):
        LIDA.load(tmp_path / "m")


def test_load_refuses_arrays_of_another_size(tmp_path, fitted_lida):
    fitted_lida.save(tmp_path / "m")
    arrays = dict(np.load(tmp_path / "m" / "arrays.npz"))
    arrays["theta_bar_"] = arrays["theta_bar_"][:-1]
    np.savez(tmp_path / "m" / "arrays.npz", **arrays)
    with pytest.raises(SavedModelError, match=r"array 'theta_bar_' has shape"):
        LIDA.load(tmp_path / "m")


def test_counts_of_a_billion_are_refused_before_allocating(monkeypatch):
    """Issue 16: LIDA on counts of 1e9 used to allocate 14.9 GiB; a Gibbs sampler keeps one topic
    per token, so the fit says what it needs and refuses past the limit (here 8 GiB), at once."""
    import time

    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", str(8 << 30))
    corpus = tj.Corpus.from_dense(np.array([[10**9, 3], [2, 5]]), vocab=["a", "b"])
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"LIDA on this corpus \(1,000,000,010 tokens, 2 documents, 2 words, "
                                         r"K_max=3\) needs about \d+\.\d GiB, more than the limit of 8\.0 GiB"):
        tj.LIDA(3, variant="lda", max_iter=2, progress=False).fit(corpus)
    assert time.perf_counter() - t0 < 5
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", "lots")
    with pytest.raises(ValueError, match="TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 .*, got 'lots'"):
        tj.LIDA(3, variant="lda", max_iter=2, progress=False).fit(corpus)
