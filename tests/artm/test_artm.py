"""ARTM estimator: regularized EM driver, schedules, over-regularization, classes, modalities,
grid fits, scikit-learn behaviour, persistence, scores."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax.artm import algorithm as em
from topicjax import regularizers as R
from topicjax.artm import ARTM, paper_trajectory
from topicjax.regularizers import Step
from topicjax.artm.plsa import PLSA
from topicjax.core.random import as_key


@pytest.fixture(scope="module")
def bars():
    corpus, phi, _ = tj.datasets.make_bars(n_docs=120, doc_length=60, alpha=0.5, seed=3)
    return corpus


def l2(phi, theta):  # a custom regularizer, three lines including the signature
    return -jnp.sum(phi * phi)


def test_custom_regularizer_trains_and_matches_hand_derived_update(bars):
    """R = -Σ φ²: φ ∂R/∂φ = -2 φ², so φ_wt ∝ (n_wt - 2τ φ_wt²)_+ (Theorem 2, eq. 15)."""
    tau = 2000.0
    kw = dict(regularizers=[(l2, tau)], random_state=1, progress=False, scores=())
    m4 = ARTM(6, max_iter=4, **kw).fit(bars)
    m5 = ARTM(6, max_iter=5, **kw).fit(bars)
    phi, theta = m4.phi_.astype(np.float64), m4.theta_.astype(np.float64)
    d, w, n = bars.doc_ids, bars.word_ids, bars.counts
    p = phi[w] * theta[:, d].T
    p /= p.sum(1, keepdims=True)
    n_wt = np.zeros_like(phi)
    np.add.at(n_wt, w, n[:, None] * p)
    a = np.maximum(n_wt - 2 * tau * phi**2, 0)
    np.testing.assert_allclose(m5.phi_, a / a.sum(0), rtol=5e-4, atol=1e-6)
    assert m5.scores_[-1]["tau/l2"] == tau
    # the regularizer changed the model relative to PLSA
    plsa = PLSA(6, max_iter=5, tol=0, random_state=1, progress=False).fit(bars)
    assert np.abs(plsa.phi_ - m5.phi_).max() > 1e-3


def test_one_artm_iteration_is_theorem_2_by_hand(bars):
    """One iteration of ARTM with decorrelation (eq. 31) and smoothing of Θ (eq. 24) against the
    M-step written out in float64 numpy from the initial Φ, Θ and hand-computed E-step counts."""
    T, gamma, alpha = 5, 3.0, 0.2
    m = ARTM(T, regularizers=[(R.decorrelate(), gamma), (R.smooth_theta(), alpha)], max_iter=1, random_state=7,
             progress=False, scores=()).fit(bars)
    # compiled (eagerly, each operation of the initialisation compiled a program of its own)
    phi0 = np.asarray(jax.jit(em.init, static_argnums=(1, 2, 3))(as_key(7), bars.n_words, bars.n_docs, T).phi,
                      np.float64)
    theta0 = np.full((T, bars.n_docs), 1.0 / T)
    d, w, n = bars.doc_ids, bars.word_ids, bars.counts
    p = phi0[w] * theta0[:, d].T
    p /= p.sum(1, keepdims=True)
    n_wt, n_td = np.zeros_like(phi0), np.zeros_like(theta0)
    np.add.at(n_wt, w, n[:, None] * p)
    np.add.at(n_td.T, d, n[:, None] * p)
    a_phi = np.maximum(n_wt - gamma * phi0 * (phi0.sum(1, keepdims=True) - phi0), 0)
    a_theta = n_td + alpha
    np.testing.assert_allclose(m.phi_, a_phi / a_phi.sum(0), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(m.theta_, a_theta / a_theta.sum(0), rtol=2e-4, atol=1e-6)


def test_plsa_is_artm_without_regularizers(bars):
    a = ARTM(5, max_iter=6, random_state=2, progress=False, scores=("perplexity",), overregularized="keep").fit(bars)
    p = PLSA(5, max_iter=6, tol=0, random_state=2, progress=False).fit(bars)
    np.testing.assert_array_equal(a.phi_, p.phi_)
    assert p.history_[-1]["perplexity"] == pytest.approx(a.scores_[-1]["perplexity"])
    assert p.transform(bars).shape == (bars.n_docs, 5)
    assert set(p.get_params()) == {"n_components", "max_iter", "tol", "random_state", "chunk", "transform_iter", "progress",
                                    "learning_offset", "learning_decay"}


_TRACES = [0]


def _count_traces(event, duration, **kw):
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":  # a new program (lowered once traced)
        _TRACES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_traces)


def test_coefficients_and_schedules_never_recompile(bars):
    # New programs are counted through JAX's monitoring events (a program is lowered once JAX's
    # in-memory cache misses): a list that the regularizer appended to would be part of its
    # fingerprint (regularizers/_fresh.py) and change at every fit.
    def log_theta(phi, theta):
        return -jnp.sum(jnp.log(theta))

    kw = dict(max_iter=5, progress=False, scores=())

    def traced(tau):
        before = _TRACES[0]
        model = ARTM(4, regularizers=[(log_theta, tau)], **kw).fit(bars)
        return _TRACES[0] - before, model

    first, _ = traced(0.1)
    second, _ = traced(2.0)
    assert first > 3 and second == 0  # a refit with another coefficient makes no new program

    def ramp(it):  # Python control flow on the iteration: tabulated on the host up front
        return 0.5 * it if it <= 5 else 2.5

    third, m = traced(ramp)
    fourth, _ = traced(lambda it: 1.0 if it % 2 else 0.5)
    assert fourth == 0  # another table of the same length: no new program
    assert [h["tau/log_theta"] for h in m.scores_] == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_score_dependent_schedule_sees_history(bars):
    seen = []

    def tau(it, history):
        seen.append(len(history))
        return 0.0 if not history else min(1.0, history[-1]["sparsity_theta"] + 0.1)

    m = ARTM(5, regularizers=[(R.sparse_theta(), tau)], max_iter=4, progress=False, scores=("sparsity",)).fit(bars)
    assert seen == [0, 1, 2, 3]
    assert m.scores_[0]["tau/sparse_theta"] == 0.0 and m.scores_[1]["tau/sparse_theta"] >= 0.1


def test_bad_regularizers_fail_before_fitting(bars):
    kw = dict(max_iter=3, progress=False, scores=())
    with pytest.raises(ValueError, match="regularizer 'bad_shape' returned an array of shape \\(4,\\)"):
        def bad_shape(phi, theta):
            return phi.sum(0)
        ARTM(4, regularizers=[(bad_shape, 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="regularizer 'nonfinite' returned nan"):
        def nonfinite(phi, theta):
            return jnp.sum(phi) * jnp.nan
        ARTM(4, regularizers=[(nonfinite, 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="regularizer 'sqrt_phi' has a non-finite gradient"):
        def sqrt_phi(phi, theta):
            return jnp.sum(jnp.sqrt(phi - jax.lax.stop_gradient(phi.min())))
        ARTM(4, regularizers=[(sqrt_phi, 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="'sparse_phi': coefficient -1.0 is negative"):
        ARTM(4, regularizers=[(R.sparse_phi(), -1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="coefficient -2.0 at iteration 3 is negative"):
        ARTM(4, regularizers=[(R.smooth_theta(), lambda it: 1.0 if it < 3 else -2.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="unknown topic 'politics'"):
        ARTM(4, regularizers=[(R.sparse_phi(topics=["politics"]), 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="must take exactly two arguments"):
        ARTM(4, regularizers=[(lambda phi: phi.sum(), 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="130 labels for 120 documents"):
        ARTM(4, **kw).fit(bars, y=[0] * 130)
    with pytest.raises(ValueError, match="document 500 does not exist"):
        ARTM(4, regularizers=[(R.labelled_documents({500: [0]}), 1.0)], **kw).fit(bars)
    with pytest.raises(ValueError, match="overregularized must be"):
        ARTM(4, overregularized="drop", **kw).fit(bars)


def test_overregularized_topics_and_documents(bars):
    """Notes 1-2: a topic/document whose regularized counts are all <= 0 is detected, reported and
    removed (or kept); never NaN."""
    kw = dict(max_iter=4, progress=False, scores=("sparsity",), random_state=0)
    regs = [(R.sparse_phi(topics=[1]), 1e5), (R.sparse_theta(docs=[7]), 1e4)]
    m = ARTM(5, regularizers=regs, **kw).fit(bars)
    assert m.scores_[0]["overregularized_topics"] == ["topic_1"]
    assert m.scores_[0]["overregularized_docs"] == 1
    assert m.removed_topics_ == ["topic_1"] and m.removed_docs_ == [7]
    assert np.all(m.phi_[:, 1] == 0) and np.all(m.theta_[1] == 0) and np.all(m.theta_[:, 7] == 0)
    assert np.all(np.isfinite(m.phi_)) and np.all(np.isfinite(m.theta_))
    np.testing.assert_allclose(np.delete(m.theta_, 7, axis=1).sum(0), 1, rtol=1e-5)
    assert np.all(m.transform(bars)[:, 1] == 0)  # a removed topic stays out of new documents
    k = ARTM(5, regularizers=regs, overregularized="keep", **kw).fit(bars)
    assert k.removed_topics_ == [] and k.scores_[-1]["overregularized_topics"] == ["topic_1"]
    assert np.all(np.isfinite(k.phi_)) and np.all(np.isfinite(k.theta_))


def test_topic_selection_chooses_the_number_of_topics(bars):
    m = ARTM(16, regularizers=[(R.topic_selection(), Step(10, 0.2))], max_iter=30, progress=False,
             scores=(), random_state=0).fit(bars)
    kept = 16 - len(m.removed_topics_)
    assert 8 <= kept <= 11  # the bars corpus has 10 topics
    assert any(r["overregularized_topics"] for r in m.scores_[10:])
    assert np.all(np.isfinite(m.theta_)) and np.all(m.theta_[m.topic_alive_ == 0] == 0)
    plsa_like = ARTM(16, max_iter=30, progress=False, scores=(), random_state=0).fit(bars)
    assert plsa_like.removed_topics_ == []


def test_paper_trajectory_rates(bars):
    """Sec. 5 recipe: sparsing from iteration 10 zeroes ~10% of φ_t's and ~8% of θ_d's non-zeros per
    iteration; background topics are smoothed (dense)."""
    m = ARTM(12, background_topics=2, regularizers=paper_trajectory(phi_rate=0.10, theta_rate=0.08), max_iter=16,
             progress=False, scores=("sparsity",), random_state=0).fit(bars)
    h = m.scores_
    assert h[8]["sparsity_phi"] < 0.05 and h[8]["tau/sparse_phi"] == 0.0 and h[9]["tau/sparse_phi"] == 1.0
    nz_phi = [1 - r["sparsity_phi"] for r in h]
    nz_theta = [1 - r["sparsity_theta"] for r in h]
    for nz, target in ((nz_phi, 0.90), (nz_theta, 0.92)):
        ratios = np.array(nz[9:]) / np.array(nz[8:-1])  # iterations 10..16
        assert np.all(ratios <= 1.0)  # zeros stay zeros
        assert abs(np.exp(np.log(ratios).mean()) - target) <= 0.035  # about the rate per iteration
    assert np.all(m.phi_[:, m.background_] > 0) and np.all(m.theta_[m.background_] > 0)


def test_fit_grid_equals_separate_fits():
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, doc_length=40, seed=5)
    regs = [(R.sparse_theta(), 0.0), (R.decorrelate(), 0.0)]
    grid = np.stack(np.meshgrid(np.linspace(0, 0.6, 5), [0.0, 5.0, 20.0, 60.0]), -1).reshape(-1, 2)
    base = ARTM(6, regularizers=regs, max_iter=8, progress=False, scores=(), random_state=0)
    models = base.fit_grid(corpus, taus=grid, vmap_size=20)  # all 20 in one vmap
    assert len(models) == 20
    for g in range(20):
        single = ARTM(6, regularizers=[(regs[0][0], grid[g, 0]), (regs[1][0], grid[g, 1])], max_iter=8,
                      progress=False, scores=(), random_state=0).fit(corpus)
        np.testing.assert_allclose(models[g].phi_, single.phi_, atol=1e-5)
        np.testing.assert_allclose(models[g].theta_, single.theta_, atol=1e-5)
        assert models[g].scores_[-1]["tau/decorrelate"] == grid[g, 1]
    assert np.abs(models[0].phi_ - models[-1].phi_).max() > 1e-3


def test_classes_psi_and_prediction(tmp_path):
    """Theorem 3: Ψ learned from labels, p(c|d) = Σ_t ψ_ct θ_td (eq. 44) for new documents."""
    corpus, _, _ = tj.datasets.make_bars(n_docs=150, doc_length=50, alpha=0.1, seed=7)
    dense = corpus.to_dense().reshape(-1, 5, 5)
    y = np.where(dense.sum(2).max(1) >= dense.sum(1).max(1), "horizontal", "vertical")
    train, test = corpus.subset(np.arange(100)), corpus.subset(np.arange(100, 150))
    m = ARTM(10, max_iter=25, progress=False, scores=(), label_weight=5.0,
             regularizers=[(R.label_regularization(), 1.0)]).fit(train, y[:100])
    assert m.psi_.shape == (2, 10) and m.classes_ == ["horizontal", "vertical"]
    np.testing.assert_allclose(m.psi_.sum(0), 1, rtol=1e-5)
    np.testing.assert_allclose(m.phi_.sum(0), 1, rtol=1e-5)  # words normalised apart from classes
    proba = m.predict_proba(test)
    np.testing.assert_allclose(proba.sum(1), 1, rtol=1e-5)
    assert np.mean(m.predict(test) == y[100:]) >= 0.8
    m.save(tmp_path / "cls")
    back = ARTM.load(tmp_path / "cls")
    np.testing.assert_allclose(back.predict_proba(test), proba, atol=1e-6)


def test_modalities_with_weights():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 3, size=(30, 12))
    counts[:, 0] += 1
    vocab = [f"w{i}" for i in range(8)] + [f"#tag{i}" for i in range(4)]
    corpus = tj.Corpus.from_dense(counts, vocab=vocab, modalities=["words"] * 8 + ["tags"] * 4)
    m = ARTM(3, max_iter=5, progress=False, scores=(), modality_weights={"tags": 3.0}).fit(corpus)
    np.testing.assert_allclose(m.phi_[:8].sum(0), 1, rtol=1e-5)
    np.testing.assert_allclose(m.phi_[8:].sum(0), 1, rtol=1e-5)
    w1 = ARTM(3, max_iter=5, progress=False, scores=(), modality_weights={"tags": 1.0}).fit(corpus)
    assert np.abs(w1.theta_ - m.theta_).max() > 1e-3  # the weight matters
    with pytest.raises(ValueError, match="unknown modality 'links'"):
        ARTM(3, max_iter=2, progress=False, modality_weights={"links": 1.0}).fit(corpus)


def test_sklearn_pipeline_and_params():
    from sklearn.base import clone
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline

    texts = ["apple banana apple fruit", "banana fruit salad", "car engine wheel", "engine oil car",
             "fruit apple juice", "wheel car road"] * 3
    pipe = make_pipeline(CountVectorizer(), ARTM(2, regularizers=[(R.sparse_theta(), 0.2)], max_iter=10,
                                                 progress=False, scores=()))
    out = pipe.fit_transform(texts)
    assert out.shape == (18, 2)
    np.testing.assert_allclose(pipe.transform(texts[:3]).sum(1), 1, rtol=1e-5)
    est = ARTM(3, max_iter=7)
    est.set_params(max_iter=9, background_topics=1)
    assert clone(est).get_params()["max_iter"] == 9 and est.get_params()["background_topics"] == 1


def test_transform_applies_theta_regularizers(bars):
    kw = dict(max_iter=10, progress=False, scores=(), random_state=0)
    sparse = ARTM(8, regularizers=[(R.sparse_theta(), 1.5)], **kw).fit(bars)
    plain = ARTM(8, **kw).fit(bars)
    assert (sparse.transform(bars) == 0).mean() > (plain.transform(bars) == 0).mean() + 0.2


def test_save_load_round_trip(bars, tmp_path):
    regs = [(R.sparse_theta(topics="specific"), Step(3, 0.5)), (R.correlated_topics(), 0.01),
            (R.smooth_phi(topics="background"), 0.1)]
    m = ARTM(6, background_topics=1, regularizers=regs, max_iter=6, progress=False, random_state=4,
             scores=("perplexity", "sparsity")).fit(bars)
    m.save(tmp_path / "m")
    back = ARTM.load(tmp_path / "m")
    np.testing.assert_array_equal(back.phi_, m.phi_)
    assert back.scores_ == m.scores_ and back.final_taus_ == m.final_taus_
    assert [t.coef.spec() for t in back.regularizer().terms] == [Step(3, 0.5).spec(), 0.01, 0.1]
    np.testing.assert_allclose(back.learned_params_[1]["mu"], m.learned_params_[1]["mu"])
    np.testing.assert_allclose(back.transform(bars), m.transform(bars), atol=1e-6)
    # a custom callable cannot be stored as JSON: load asks for it by name
    c = ARTM(4, regularizers=[(l2, 2.0)], max_iter=2, progress=False, scores=()).fit(bars)
    c.save(tmp_path / "c")
    with pytest.raises(ValueError, match="regularizer #0 'l2' is a custom callable"):
        ARTM.load(tmp_path / "c")
    with pytest.raises(ValueError, match="the saved model has \\['l2'\\]"):
        ARTM.load(tmp_path / "c", regularizers=[(R.decorrelate(), 1.0)])
    c2 = ARTM.load(tmp_path / "c", regularizers=[(l2, 2.0)])
    np.testing.assert_allclose(c2.transform(bars), c.transform(bars), atol=1e-6)
    p = PLSA(3, max_iter=3, progress=False).fit(bars)
    p.save(tmp_path / "p")
    np.testing.assert_array_equal(PLSA.load(tmp_path / "p").phi_, p.phi_)


def test_scores_and_plot(bars):
    import matplotlib

    matplotlib.use("Agg")
    from topicjax.evaluation.scores import HeldoutPerplexity, plot_scores

    train, test = bars.train_test_split(0.2, seed=0)
    obs, held = test.completion_split(seed=0)
    m = ARTM(6, background_topics=1, regularizers=paper_trajectory(sparse_start=3), max_iter=5, progress=False,
             score_every=2, random_state=0,
             scores=("perplexity", "sparsity", "background_ratio", "kernel", "coherence", "kernel_coherence",
                     HeldoutPerplexity(obs, held, n_iter=5))).fit(train)
    assert "kernel_purity" not in m.scores_[0] and "kernel_purity" in m.scores_[1]
    last = m.scores_[-1]  # scores are also computed after the last iteration
    # every recorded score equals the metric computed afresh on the final model
    spec = np.flatnonzero(m.topic_alive_ > 0)
    spec = spec[~np.isin(spec, m.background_)]
    n_t = m.theta_ @ train.doc_lengths
    ks = tj.metrics.kernel_scores(m.phi_, n_t)
    expected = {
        "sparsity_phi": tj.metrics.sparsity(m.phi_, columns=spec, axis=1),
        "sparsity_theta": tj.metrics.sparsity(m.theta_, columns=spec, axis=0),
        "background_ratio": tj.metrics.background_ratio(m.phi_, m.theta_, train, m.background_),
        "kernel_size": ks["size"][spec].mean(), "kernel_purity": ks["purity"][spec].mean(),
        "heldout_perplexity": tj.metrics.heldout_perplexity(m.phi_, obs, held, n_iter=5),
        "coherence_10": np.nanmean(tj.metrics.coherence(m.phi_, train, k=10, topics=spec)),
    }
    for key, want in expected.items():
        assert last[key] == pytest.approx(want, rel=1e-4, abs=1e-6), key
    # the perplexity is that of the parameters at the start of the last iteration (eq. 56)
    assert last["perplexity"] == pytest.approx(np.exp(-last["objective"] / train.n_tokens), rel=1e-9)
    assert 0 < last["background_ratio"] < 1
    fig = plot_scores(m.scores_, title="ARTM")
    assert len(fig.axes) == 5  # three charts, two with a right-hand axis
    with pytest.raises(ValueError, match="unknown score 'purity'"):
        ARTM(3, max_iter=1, progress=False, scores=("purity",)).fit(bars)


def test_table1_experiment_quick(tmp_path, load_experiment):
    """Smoke run of the Table 1 experiment (synthetic corpus, all ten rows, every column)."""
    mod = load_experiment("artm_table1")
    out = tmp_path / "t.md"
    res = mod.main(["--quick", "--out", str(out)])
    assert list(res) == [r[0] for r in mod.ROWS]
    assert all(np.isfinite(v) for row in res.values() for v in row.values())
    assert res["PLSA"]["S_Phi"] < 0.1 < res["Sm Sp b"]["S_Phi"]  # sparsing sparses
    text = out.read_text()
    assert "Command: `python" in text and "| Sm Sp b Dc | + | b | + |" in text and "Trends of the paper" in text


def test_fit_many_seeds_and_numbers_of_topics_equal_separate_fits():
    """Random restarts and several numbers of topics (masked) in one compiled call."""
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, doc_length=40, seed=5)
    regs = [(R.smooth_phi(), 0.05), (R.sparse_theta(), 0.1)]
    seeds, tops = [0, 3, 3], [6, 4, 6]
    for remove in ("remove", "keep"):
        base = ARTM(6, regularizers=regs, max_iter=6, progress=False, scores=("perplexity",),
                    overregularized=remove)
        models = base.fit_many(corpus, seeds=seeds, n_topics=tops, vmap_size=2)
        for g, (seed, T) in enumerate(zip(seeds, tops)):
            single = ARTM(T, regularizers=regs, max_iter=6, progress=False, scores=("perplexity",),
                          random_state=seed, overregularized=remove).fit(corpus)
            m = models[g]
            assert m.n_components == T and m.random_state == seed and m.phi_.shape == (corpus.n_words, T)
            np.testing.assert_allclose(m.phi_, single.phi_, atol=1e-5)
            np.testing.assert_allclose(m.theta_, single.theta_, atol=1e-5)
            np.testing.assert_allclose(m.scores_[-1]["objective"], single.scores_[-1]["objective"], rtol=1e-5)
            np.testing.assert_allclose(m.scores_[-1]["perplexity"], single.scores_[-1]["perplexity"], rtol=1e-5)
            assert len(m.topic_names_) == T
    # the smoothing term would revive masked topics if they were not masked: they stay zero
    assert np.all(models[1].phi_.sum(0) > 0.99)


def test_fit_many_bad_input():
    corpus, _, _ = tj.datasets.make_bars(n_docs=20, doc_length=20, seed=1)
    base = ARTM(4, max_iter=2, progress=False, scores=())
    with pytest.raises(ValueError, match="at least one of"):
        base.fit_many(corpus)
    with pytest.raises(ValueError, match="one length"):
        base.fit_many(corpus, seeds=[0, 1], n_topics=[3])
    with pytest.raises(ValueError, match="no models"):
        base.fit_many(corpus, seeds=[])
    with pytest.raises(ValueError, match="n_topics must hold integers >= 1"):
        base.fit_many(corpus, n_topics=[3, 0])
    with pytest.raises(ValueError, match="background_topics"):
        ARTM(4, background_topics=1, max_iter=2, progress=False).fit_many(corpus, n_topics=[3, 4])


def test_grid_benchmarks_quick_smoke_run(tmp_path, load_experiment):
    """experiments/bench_grid.py and bench_grid_compiled.py --quick (the grid must equal the
    sequential fits: bench_grid checks it and raises otherwise)."""
    out = tmp_path / "grid.md"
    load_experiment("bench_grid").main(["--quick", "--out", str(out)])
    text = out.read_text()
    assert "Command:" in text and "| bars | 6 |" in text
    rows = load_experiment("bench_grid_compiled").main(["--quick"])
    assert rows[0][0] == "bars" and all(v > 0 for v in rows[0][1].values())
