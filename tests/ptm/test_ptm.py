"""Parsimonious topic model: GEM descent and constraints, initialisation, estimator, model-order
selection, document completion, label consistency and coherence."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gammaln
from sklearn.base import clone

import topicjax as tj
from topicjax.ptm import gem, layout
from topicjax.ptm import model as ptm
from topicjax.ptm import order as ptm_order
from topicjax.data.corpus import Corpus
from topicjax.ptm import PTM

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow

# one corpus shape (documents x words) and one padded number of topics (8) for most tests, so that
# the compiled GEM step is shared between them
D, N, M = 120, 25, 5


def planted_corpus(seed, n_docs=D, n_words=N, n_topics=3):
    """Documents from a few sparse topics over a shared background (a PTM-like corpus)."""
    rng = np.random.default_rng(seed)
    bg = rng.dirichlet(np.ones(n_words))
    topics = []
    for k in range(n_topics):
        t = 0.5 * bg.copy()
        spec = rng.choice(n_words, 5, replace=False)
        t[spec] += 0.5 / 5
        topics.append(t / t.sum())
    dense = np.zeros((n_docs, n_words), np.int64)
    for d in range(n_docs):
        ks = rng.choice(n_topics, rng.integers(1, 3), replace=False)
        mix = sum(topics[k] for k in ks) / len(ks)
        dense[d] = rng.multinomial(rng.integers(15, 40), mix)
    return Corpus.from_dense(dense), dense


def np_bic(kind, dense, u, v, alpha, beta, beta0):
    """Float64 numpy BIC (2014 eq. 26 / sec. 7.4 / 2020 eq. 16), vectorised, independent of JAX.
    ``u`` ``(M, N)``, ``v`` / ``alpha`` ``(M, D)``."""
    Mn, Nn = u.shape
    b = np.where(u, beta, beta0[None, :])  # (M, N)
    p = (alpha * v).T @ b  # (D, N)
    ll = np.sum(dense[dense > 0] * np.log(p[dense > 0]))
    L = dense.sum(1)
    Md = v.sum(0)
    lbar = (v * L[None, :]).sum(1)
    c = len(L) * math.log(Mn) + np.sum(gammaln(Mn + 1) - gammaln(Md + 1) - gammaln(Mn - Md + 1))
    c += 0.5 * np.sum((Md - 1) * np.log(L / (2 * math.pi)))
    hl = 0.5 * np.log(lbar / (2 * math.pi))
    if kind in ("2020", "2020-printed"):
        k = u.sum(0)
        c0 = 0.5 * math.log(lbar.sum() / (2 * math.pi))
        c += np.sum(np.where(k < Mn, c0, 0.0) + np.where((k > 0) & (k < Mn), Mn * math.log(2) * (kind == "2020"), 0.0))
        c += np.sum(u * hl[:, None])
    else:
        c += np.sum(u.sum(1) * hl)
        T = Mn * Nn
        if kind == "2014":
            q = u.sum() / T
            h = 0.0 if q in (0.0, 1.0) else -(q * math.log(q) + (1 - q) * math.log1p(-q))
            c += T * h - 0.5 * math.log(T)
        else:
            c += T * math.log(2)
    return c - ll


def state_arrays(state, m=M):
    u = np.asarray(state.u)[:m]
    v = np.asarray(state.v)[:, :m].T
    alpha = np.asarray(state.alpha, np.float64)[:, :m].T
    beta = np.asarray(state.beta, np.float64)[:m]
    return u, v, alpha, beta


def check_constraints(u, v):
    assert np.all(u.sum(1) >= 1), "a topic lost its last specific word"
    assert np.all(v.sum(1) >= 1), "a topic lost its last document"
    assert np.all(v.sum(0) >= 1), "a document lost its last topic"


# ----------------------------------------------------------------------------- GEM
@pytest.mark.parametrize("kind", ("2014", "2014-exact", "2020", "2020-printed"))
def test_gem_never_increases_bic(kind):
    """Property: on random small corpora and seeds, the float64 BIC of every GEM iterate is
    non-increasing, the constraints hold, and the step's own BIC equals the reference."""
    cfg = gem.GEMConfig(kind=kind)
    total_flips = 0
    for seed in range(4):
        corpus, dense = planted_corpus(seed)
        data = layout.ptm_data(corpus)
        beta0 = np.asarray(data.beta0, np.float64)
        state = gem.init_state(jax.random.key(seed), data, M, n_init_docs=2)
        prev = np.inf
        for it in range(5):
            u, v, alpha, beta = state_arrays(state)
            check_constraints(u, v)
            b = np_bic(kind, dense, u, v, alpha, beta, beta0)
            assert gem.state_bic(state, data, kind) == pytest.approx(b, rel=1e-6)
            assert b <= prev + 1e-6 * abs(b), (seed, it, b - prev)
            prev = b
            state = gem.gem_step(state, data, cfg)
            total_flips += int(state.n_u_flips) + int(state.n_v_flips)
    assert total_flips > 20  # the switches did move


def test_init_is_seeded_and_satisfies_the_constraints():
    corpus, dense = planted_corpus(11)
    data = layout.ptm_data(corpus)
    a = gem.init_state(jax.random.key(3), data, M, n_init_docs=2)
    b = gem.init_state(jax.random.key(3), data, M, n_init_docs=2)
    c = gem.init_state(jax.random.key(4), data, M, n_init_docs=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.u), np.asarray(c.u))
    u, v, alpha, beta = state_arrays(a)
    check_constraints(u, v)
    assert np.all(v.sum(0) == 1)  # hard assignment (sec. 6.3)
    # specific words are exactly the words of the assigned documents; beta is their frequency share
    for j in range(M):
        words = dense[v[j]].sum(0)
        np.testing.assert_array_equal(u[j], words > 0)
        S = np.asarray(data.beta0)[u[j]].sum()
        np.testing.assert_allclose(beta[j][u[j]], words[u[j]] / words.sum() * S, rtol=1e-5)
    # every document was given its maximum-likelihood topic under the seed model, or is a seed
    assert np.all(np.isfinite(np.asarray(a.loglik_doc)))


def test_init_and_step_are_vmappable():
    """Restarts over seeds: init runs under vmap (and equals the single runs); the GEM step traces
    under vmap with the batch axis everywhere (checked abstractly, without compiling it again)."""
    corpus, _ = planted_corpus(2)
    data = layout.ptm_data(corpus)
    keys = jax.random.split(jax.random.key(0), 2)
    # compiled as one program (vmapped op by op it compiled 78 small ones)
    batch = jax.jit(jax.vmap(lambda k: gem._init_impl(k, data, M, 8, 2)))(keys)
    single = gem.init_state(keys[1], data, M, n_init_docs=2)
    np.testing.assert_array_equal(np.asarray(batch.u[1]), np.asarray(single.u))
    np.testing.assert_allclose(np.asarray(batch.loglik_doc[1]), np.asarray(single.loglik_doc), rtol=1e-6)
    out = jax.eval_shape(jax.vmap(lambda s: gem.gem_step_impl(s, data, gem.GEMConfig())), batch)
    for a, b in zip(out, batch):
        assert a.shape == b.shape and a.dtype == b.dtype


def test_nonfinite_step_is_reported_with_the_last_good_state():
    """A GEM step that goes non-finite ends the fit with NumericalError; the driver kept only the
    parameters and switches through the step (PTM's rollback), and the error's state has the
    E-step statistics of those recomputed: the state after the last good iteration."""
    from topicjax.core import driver

    corpus, _ = planted_corpus(5)
    data = layout.ptm_data(corpus)
    cfg = gem.GEMConfig()
    algo = ptm.algorithm(cfg.kind, N)
    init = lambda: gem.init_state(jax.random.key(1), data, M, n_init_docs=2)  # noqa: E731
    good, _ = driver.run(algo, (cfg, N), init(), (data,), max_iter=2, progress=False)

    def poisoned(state, args, static):
        new = gem._algo_step(state, args, static)
        return new._replace(alpha=jnp.where(state.iteration >= 2, jnp.nan, new.alpha))

    with pytest.raises(tj.core.NumericalError, match="PTM: iteration 3 produced non-finite values") as e:
        driver.run(algo._replace(step=poisoned), (cfg, N), init(), (data,), max_iter=4, progress=False,
                   desc="PTM", donate=True)
    assert e.value.iteration == 3 and e.value.reason == "nonfinite"
    bad = e.value.state
    for name in ("beta", "u", "alpha", "v", "topic_mask", "iteration", "n_u_flips", "n_v_flips"):
        np.testing.assert_array_equal(np.asarray(getattr(bad, name)), np.asarray(getattr(good, name)), err_msg=name)
    for name in ("x", "loglik_doc", "s1", "s2"):  # recomputed by another compiled E-step
        np.testing.assert_allclose(np.asarray(getattr(bad, name)), np.asarray(getattr(good, name)), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


# ----------------------------------------------------------------------------- estimator
@pytest.fixture(scope="module")
def bars():
    corpus, _, _ = tj.datasets.make_bars(n_docs=D, seed=0, doc_length=60)
    return corpus


@pytest.fixture(scope="module")
def fitted(bars):
    return PTM(n_components=6, bic="2014-exact", max_iter=15, random_state=0, progress=False).fit(bars)


def test_estimator_fit_attributes(fitted, bars):
    m = fitted
    W = bars.n_words
    assert m.u_.shape == (6, W) and m.v_.shape == (6, bars.n_docs) and m.theta_.shape == (6, bars.n_docs)
    assert m.beta_.shape == (6, W) and m.beta0_.shape == (W,) and m.phi_.shape == (W, 6)
    check_constraints(m.u_, m.v_)
    np.testing.assert_allclose(m.phi_.sum(0), 1.0, atol=1e-5)  # each topic is a distribution
    np.testing.assert_allclose(m.theta_.sum(0), 1.0, atol=1e-5)
    assert np.all(m.theta_[~m.v_] == 0) and np.all(m.beta_[~m.u_] == 0)
    np.testing.assert_allclose(m.beta0_, bars.word_counts / bars.n_tokens, rtol=1e-6)  # eq. 11
    h = np.asarray(m.bic_history_)
    assert len(h) == m.n_iter_ + 1 and np.all(np.diff(h) <= 1e-6 * abs(h[0])) and h[-1] == m.bic_
    assert 1.0 <= m.m_bar_ <= 6 and 1 <= m.n_bar_ <= W and 1 <= m.n_unique_ <= W
    assert m.frac_all_off_ == pytest.approx(np.mean(~m.u_.any(0)))
    # u_ chosen parsimoniously on bars: some words are shared in every topic
    assert m.u_.sum() < m.u_.size
    spec = m.top_specific_words(3)
    shared = m.top_shared_words(3)
    for j in range(6):
        ids = [m.vocab_.index(w) for w in spec[j]]
        assert all(m.u_[j, i] for i in ids)
        assert list(m.beta_[j, ids]) == sorted(m.beta_[j, ids], reverse=True)
        assert all(not m.u_[j, m.vocab_.index(w)] for w in shared[j])


def test_estimator_is_seeded_clonable_and_transforms(fitted, bars):
    again = clone(fitted).fit(bars)
    np.testing.assert_array_equal(again.u_, fitted.u_)
    np.testing.assert_array_equal(again.v_, fitted.v_)
    assert again.bic_ == fitted.bic_
    theta = fitted.transform(bars.subset(np.arange(10)))
    assert theta.shape == (10, 6)
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)
    assert np.all(theta > 0)  # every topic allowed for new documents (sec. 7)


def test_save_load_round_trip(fitted, bars, tmp_path):
    fitted.save(tmp_path / "m")
    back = PTM.load(tmp_path / "m")
    for name in ("u_", "v_", "theta_", "beta_", "beta0_", "shared_top_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(fitted, name))
    assert back.u_.dtype == bool and back.bic_ == fitted.bic_ and back.bic_history_ == fitted.bic_history_
    assert {k: v for k, v in back.get_params().items() if k != "v_candidates"} == \
        {k: v for k, v in fitted.get_params().items() if k != "v_candidates"}
    assert list(back.v_candidates) == list(fitted.v_candidates)
    assert back.top_shared_words(4) == fitted.top_shared_words(4)
    np.testing.assert_allclose(back.transform(bars), fitted.transform(bars), rtol=1e-6)


def test_heldout_log_likelihood_equals_reference(fitted, bars):
    obs, held = bars.completion_split("words", seed=1)
    got = fitted.heldout_log_likelihood(obs, held)
    alpha = fitted.transform(obs)  # (D, M), all topics allowed
    p = alpha @ fitted.phi_.T  # (D, W)
    dense = held.to_dense()
    want = float(np.sum(dense[dense > 0] * np.log(p[dense > 0])))  # eq. 32
    assert got == pytest.approx(want, rel=1e-5)
    ll, n = fitted.completion_log_likelihood(bars, seed=1)
    assert ll == pytest.approx(got, rel=1e-6) and n == held.n_tokens


def test_completion_rejects_short_documents(fitted):
    dense = np.zeros((4, 25), np.int64)
    dense[:, :3] = 2
    dense[2] = 0
    dense[2, 5] = 1  # a one-token document
    with pytest.raises(ValueError, match="document 2 has 1 distinct word"):
        fitted.completion_log_likelihood(Corpus.from_dense(dense, vocab=fitted.vocab_))
    dense[2, 5] = 3  # 3 tokens but one distinct word: splittable by tokens only
    with pytest.raises(ValueError, match="document 2 has 1 distinct word"):
        fitted.completion_log_likelihood(Corpus.from_dense(dense, vocab=fitted.vocab_))
    ll, n = fitted.completion_log_likelihood(Corpus.from_dense(dense, vocab=fitted.vocab_), protocol="tokens")
    assert np.isfinite(ll) and n > 0


def test_bad_inputs():
    corpus, _ = planted_corpus(1, n_docs=5)
    with pytest.raises(ValueError, match="larger than the number of documents"):
        PTM(n_components=6, progress=False).fit(corpus)
    with pytest.raises(ValueError, match="bic must be one of"):
        PTM(n_components=2, bic="2015", progress=False).fit(corpus)
    with pytest.raises(ValueError, match="m_max=6 is larger than the number of documents"):
        ptm_order.select_order(corpus, m_max=6, m_min=2, step=2, progress=False)
    corpus, _ = planted_corpus(1)
    with pytest.raises(ValueError, match="step=4 from m_max=10 skips past m_min=4"):
        ptm_order.select_order(corpus, m_max=10, m_min=4, step=4, progress=False)
    with pytest.raises(ValueError, match="m_min=5 is larger than m_max=3"):
        ptm_order.select_order(corpus, m_max=3, m_min=5, step=1, progress=False)
    with pytest.raises(ValueError, match="step must be an integer >= 1"):
        ptm_order.select_order(corpus, m_max=3, m_min=1, step=0, progress=False)


# ----------------------------------------------------------------------------- model order
def test_select_order_top_down(bars):
    res = ptm_order.select_order(bars, m_max=8, m_min=4, step=2, bic="2014-exact", max_iter=8, progress=False)
    assert res.orders == [8, 6, 4] and len(res.bics) == 3 and set(res.models) == {8, 6, 4}
    assert res.best_order == res.orders[int(np.argmin(res.bics))] and res.best_model is res.models[res.best_order]
    for order, model in res.models.items():
        assert model.u_.shape[0] == order and model.bic_ == res.bics[res.orders.index(order)]
        check_constraints(model.u_, model.v_)
        assert np.all(np.diff(model.bic_history_) <= 1e-6 * abs(model.bic_history_[0]))
    # warm start: the 6-topic model starts from 6 of the 8 topics (the least massive removed)
    m8, m6 = res.models[8], res.models[6]
    mass = (m8.theta_ * m8.v_).sum(1)
    kept = np.sort(np.argsort(mass, kind="stable")[2:])
    start_u = m8.u_[kept]
    assert np.mean(start_u == m6.u_) > 0.6
    orders, bics = res.curve()
    assert list(orders) == [8, 6, 4] and np.all(np.isfinite(bics))


def test_reduce_topics_warm_start_is_valid(fitted, bars):
    """Removing the least massive topics keeps the others, every distribution normalised, every
    document with a topic and every token with positive probability -- also when a topic had a
    specific word of probability 0 (a "dead" word, which would trap a newly assigned document)."""
    s = fitted.last_state_
    data = fitted._layout(bars)  # the fit's own rows and words (each may be rounded up to a bucket)
    W = bars.n_words
    beta0 = np.asarray(data.beta0, np.float64)  # 0 after the vocabulary's W words
    u = np.asarray(s.u).copy()
    beta = np.asarray(s.beta, np.float64).copy()
    n = int(np.flatnonzero(~u[0])[0])  # inject a dead word into topic 0, keeping it normalised
    S = beta0[u[0]].sum()
    beta[0] *= (S + beta0[n]) / S
    u[0, n], beta[0, n] = True, 0.0
    s = s._replace(u=jnp.asarray(u), beta=jnp.asarray(beta, jnp.float32))
    mass = (fitted.theta_ * fitted.v_).sum(1)
    keep = np.sort(np.argsort(mass, kind="stable")[2:])
    r = ptm_order.reduce_topics(s, data, 2)
    ru, rv = np.asarray(r.u)[:4, :W], np.asarray(r.v)[:bars.n_docs, :4].T
    assert not np.asarray(r.v)[bars.n_docs:].any()  # rows after the documents (a bucket's) take no topic
    assert not np.asarray(r.u)[:, W:].any()  # nor words after the vocabulary
    rbeta = np.asarray(r.beta, np.float64)[:4, :W]
    beta0 = beta0[:W]
    check_constraints(ru, rv)
    assert not np.any(ru & (rbeta <= 0))  # no dead specific word is left
    b = np.where(ru, rbeta, beta0[None, :])
    np.testing.assert_allclose(b.sum(1), 1.0, atol=1e-5)
    if 0 in keep:
        j = int(np.flatnonzero(keep == 0)[0])
        assert not ru[j, n]
        np.testing.assert_allclose(rbeta[j][ru[j]], np.asarray(fitted.beta_, np.float64)[0][ru[j]], rtol=1e-5)
    np.testing.assert_array_equal(ru, fitted.u_[keep])  # the kept topics, the dead word shared again
    p = (np.asarray(r.alpha, np.float64)[:, :4] @ b)[bars.doc_ids, bars.word_ids]
    assert np.all(p > 1e-12)


def test_experiment_quick(tmp_path, load_experiment):
    mod = load_experiment("ptm_order_sweep")
    out = tmp_path / "sweep.md"
    mod.main(["--quick", "--out", str(out)])
    text = out.read_text()
    assert "| M |" in text and "PLSA" in text and "--quick" in text


def test_benchmark_quick(tmp_path, load_experiment):
    """experiments/bench_ptm.py: both backends' sweeps (each in its own process) reach the same
    orders with BIC values equal to round-off."""
    mod = load_experiment("bench_ptm")
    out = tmp_path / "bench.md"
    runs = mod.main(["--quick", "--out", str(out)])
    assert [r["backend"] for r in runs] == ["ffi", "xla"]
    assert runs[0]["best_order"] == runs[1]["best_order"]
    ffi, xla = ([(o["M"], o["bic"]) for o in r["orders"]] for r in runs)
    assert [m for m, _ in ffi] == [m for m, _ in xla] == [8, 6]
    assert [b for _, b in ffi] == pytest.approx([b for _, b in xla], rel=1e-6)
    text = out.read_text()
    assert "--quick" in text and "| ffi |" in text and "| xla |" in text and "rel. diff" in text


# ----------------------------------------------------------------------------- restarts
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def many(bars):
    """Three restarts in one compiled call, vmapped (the CPU default would run them one at a time),
    with the settings of ``fitted`` (seed 0)."""
    base = PTM(n_components=6, bic="2014-exact", max_iter=15, random_state=0, progress=False)
    return base, base.fit_many(bars, seeds=list(SEEDS), vmap_size=len(SEEDS))


def assert_same_fit(a, b):
    np.testing.assert_array_equal(a.u_, b.u_)
    np.testing.assert_array_equal(a.v_, b.v_)
    np.testing.assert_allclose(a.theta_, b.theta_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.beta_, b.beta_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.phi_, b.phi_, rtol=1e-6, atol=1e-7)
    assert a.n_iter_ == b.n_iter_
    assert a.bic_ == pytest.approx(b.bic_, rel=1e-9)
    # the initial BIC is that of the initial state, whose float32 parameters a batched init
    # computes with its reductions in another order: equal to float32 round-off (7.7e-9 relative
    # measured on the pure-XLA path), the later BICs to 1e-9
    np.testing.assert_allclose(a.bic_history_[:1], b.bic_history_[:1], rtol=1e-7)
    np.testing.assert_allclose(a.bic_history_[1:], b.bic_history_[1:], rtol=1e-9)
    for key in ("u_flips", "v_flips"):
        assert [h[key] for h in a.history_] == [h[key] for h in b.history_]


@pytest.fixture(scope="module")
def separate(fitted, bars):
    """The separate fits of :data:`SEEDS` with ``fitted``'s settings (seed 0: ``fitted`` itself)."""
    return [fitted] + [clone(fitted).set_params(random_state=s).fit(bars) for s in SEEDS[1:]]


@pytest.mark.user_compiler  # float32 rounding of XLA's default settings
def test_fit_many_equals_separate_fits(many, separate):
    """Restarts vmapped in one compiled while-loop equal separate fits seed by seed (switches
    exactly, parameters and BIC to float tolerance), including restarts that stop early while
    the others go on (per-restart convergence masks).  Only this equality depends on the
    compiler's settings (its re-run at XLA's defaults does nothing else); what the restarts are
    besides: :func:`test_fit_many_restarts_are_complete_fitted_models`."""
    _, models = many
    for m, s in zip(models, separate):
        assert_same_fit(m, s)
    # the batch exercised the masks: restarts stopped at different iterations, before max_iter
    n_iters = [m.n_iter_ for m in models]
    assert len(set(n_iters)) > 1 and min(n_iters) < 15


def test_fit_many_restarts_are_complete_fitted_models(many, separate, bars):
    """Each restart of ``fit_many`` is a fitted estimator of its own seed: constraints, BIC
    against the float64 numpy reference, its history, ``transform`` as its separate fit's;
    the prototype is left unfitted and :func:`best_fit` takes the smallest BIC."""
    base, models = many
    assert not hasattr(base, "u_")  # the prototype is left unfitted
    assert [m.random_state for m in models] == list(SEEDS)
    for m in models:
        check_constraints(m.u_, m.v_)
        assert m.bic_ == m.bic_history_[-1] and len(m.history_) == m.n_iter_
    # the restarts are different models, and best_fit takes the smallest BIC (reference BIC in numpy)
    assert not np.array_equal(models[0].u_, models[1].u_)
    dense = bars.to_dense()
    for m in models:
        ref = np_bic("2014-exact", dense, m.u_, m.v_, m.theta_.astype(np.float64), m.beta_.astype(np.float64),
                     m.beta0_.astype(np.float64))
        assert m.bic_ == pytest.approx(ref, rel=1e-6)
    assert ptm.best_fit(models) is models[int(np.argmin([m.bic_ for m in models]))]
    # the models are complete estimators
    np.testing.assert_allclose(models[1].transform(bars.subset(np.arange(5))),
                               separate[1].transform(bars.subset(np.arange(5))), rtol=1e-5, atol=1e-7)


def test_fit_many_reports_non_finite_restarts(many, bars, monkeypatch):
    """A restart whose parameters became non-finite on the device is an error naming its seed."""
    from topicjax.core import driver

    base, _ = many
    real = driver.run_many

    def poisoned(*args, **kwargs):
        finals, recs, n_iters, status = real(*args, **kwargs)
        return finals, recs, n_iters, status.at[1].set(driver.NONFINITE)

    monkeypatch.setattr(driver, "run_many", poisoned)
    with pytest.raises(tj.core.NumericalError, match=r"seed 1\): non-finite parameters at iteration \d+"):
        base.fit_many(bars, seeds=list(SEEDS), vmap_size=len(SEEDS))


def test_fit_many_bad_inputs(bars):
    base = PTM(n_components=6, bic="2014-exact", max_iter=15, progress=False)
    with pytest.raises(ValueError, match="seeds is empty"):
        base.fit_many(bars, seeds=[])
    with pytest.raises(ValueError, match="seeds or n_restarts, not both"):
        base.fit_many(bars, seeds=[1], n_restarts=2)
    with pytest.raises(ValueError, match="needs seeds"):
        base.fit_many(bars)
    with pytest.raises(ValueError, match=r"seeds\[1\] = -3 is not a non-negative integer"):
        base.fit_many(bars, seeds=[1, -3])
    with pytest.raises(ValueError, match=r"seeds\[0\] = 1.5 is not a non-negative integer"):
        base.fit_many(bars, seeds=[1.5])
    with pytest.raises(ValueError, match="seed 4 appears more than once"):
        base.fit_many(bars, seeds=[4, 2, 4])
    with pytest.raises(ValueError, match="one-dimensional sequence"):
        base.fit_many(bars, seeds=[[1, 2]])
    with pytest.raises(ValueError, match="n_restarts must be an integer >= 1"):
        base.fit_many(bars, n_restarts=0)
    with pytest.raises(ValueError, match="vmap_size must be an integer >= 1"):
        base.fit_many(bars, seeds=[1, 2], vmap_size=0)
    with pytest.raises(ValueError, match="larger than the number of documents"):
        PTM(n_components=6, progress=False).fit_many(bars.subset(np.arange(4)), seeds=[0])
    with pytest.raises(ValueError, match="bic must be one of"):
        PTM(n_components=2, bic="2015", progress=False).fit_many(bars, seeds=[0])
    with pytest.raises(ValueError, match="at least one fitted model"):
        ptm.best_fit([])
    assert ptm._check_seeds(None, 3, 4) == [4, 5, 6]  # n_restarts counts from random_state
    assert ptm._check_seeds(np.array([7, 3]), None, 0) == [7, 3]
