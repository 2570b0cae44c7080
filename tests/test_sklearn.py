"""scikit-learn conformance of every estimator (issue 15 part 2).

* ``score(X)`` (held-out log-likelihood per token by document completion) against independent
  references: a hand-written EM loop for Θ (PLSA), the theme mixture's conditional computed with
  numpy (TTMM), the families' own document-completion methods (PTM eq. 32, LIDA eq. 45);
  ``perplexity``; ``GridSearchCV`` without a ``scoring`` finding the true number of topics;
* ``partial_fit`` equal to :func:`topicjax.scale.online.fit_online` over the same batches;
* the vocabulary in a ``Pipeline`` (:class:`topicjax.data.CorpusVectorizer`), from a DataFrame,
  ``get_feature_names_out`` and ``set_output``;
* scikit-learn's own estimator checks, twice: on the data they generate (real numbers: most
  checks stop at our "counts are integers" error; each expected failure below says why), and on
  the same data turned into counts (the checks' ``_enforce_estimator_tags_X`` patched to give
  every document 4 tokens per word, spread as the non-negative data, :func:`as_counts`), which
  exercises everything else.  Expected failures carry their reasons in ``FLOAT_DATA`` and
  ``ON_COUNTS``.

The fitted models of the score, name and input-form tests are the ones shared by the
estimator-wide tests (``tests/fitted_models.py``), fitted once per process.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

import topicjax as tj
from topicjax import regularizers as R
from topicjax.data import CorpusVectorizer
from topicjax.estimator import SCORE_SEED
from topicjax.scale import online

import fitted_models as fm

#: every family with the settings of the estimator-wide tests (tests/fitted_models.py: 4 topics)
FAMILIES = {name: (lambda name: lambda **kw: fm.make(name, **kw))(name) for name in ("PLSA", "ARTM", "PTM", "TTMM",
                                                                                      "LIDA")}
NAMES = list(FAMILIES)


@pytest.fixture(scope="module")
def bars():
    corpus, phi, _ = tj.datasets.make_bars(n_docs=120, doc_length=40, seed=3)
    return corpus, phi


@pytest.fixture(scope="module")
def split():
    """``(train, test)``: the estimator-wide tests' corpus (tests/fitted_models.py) and 30 other
    documents of the same bars, long enough for every completion split."""
    return fm.corpus(), tj.datasets.make_bars(n_docs=30, doc_length=40, seed=3)[0]


@pytest.fixture(scope="module")
def fitted(split):
    """Each family fitted on the training part with ``random_state=0``: the shared models."""
    return {name: fm.fitted(name) for name in FAMILIES}


# ============================================================================= score
def hand_theta(phi, corpus, n_iter):
    """Θ (T x D) with Φ fixed by the EM iterations of ARTM eq. 16 without regularizers, from
    uniform: θ_td ∝ Σ_w n_dw φ_wt θ_td / Σ_s φ_ws θ_sd (a plain numpy loop over documents)."""
    T = phi.shape[1]
    dense = corpus.to_dense().astype(np.float64)
    theta = np.full((T, corpus.n_docs), 1.0 / T)
    for _ in range(n_iter):
        for d in range(corpus.n_docs):
            p = phi @ theta[:, d]
            nz = dense[d] > 0
            n_t = theta[:, d] * (phi[nz].T @ (dense[d, nz] / p[nz]))
            theta[:, d] = n_t / n_t.sum()
    return theta


def test_score_is_document_completion_plsa(fitted, split):
    model, (_, test) = fitted["PLSA"], split
    observed, heldout = test.completion_split("tokens", seed=SCORE_SEED)  # every test document is long enough
    phi = np.asarray(model.phi_, np.float64)
    theta = hand_theta(phi, observed, model.transform_iter)
    held = heldout.to_dense()
    ll = float(np.sum(held * np.log(np.maximum(phi @ theta, 1e-300)).T))
    assert model.completion_score(test) == (pytest.approx(ll, rel=2e-5), heldout.n_tokens)
    assert model.score(test) == pytest.approx(ll / heldout.n_tokens, rel=2e-5)
    assert model.perplexity(test) == pytest.approx(np.exp(-ll / heldout.n_tokens), rel=1e-4)
    # with the parts given: Θ from the first, the second scored
    assert model.perplexity(observed, heldout) == pytest.approx(np.exp(-ll / heldout.n_tokens), rel=1e-4)
    assert model.score(test) == model.score(test.to_sparse())  # deterministic, any input form


def test_score_is_the_exact_conditional_for_ttmm(fitted, split):
    model, (_, test) = fitted["TTMM"], split
    observed, heldout = test.completion_split("tokens", seed=SCORE_SEED)
    log_a = np.log(np.asarray(model.tau_, np.float64) @ np.asarray(model.beta_, np.float64))  # J x W, eq. 1
    log_pi = np.log(np.asarray(model.pi_, np.float64))
    s_obs = observed.to_dense() @ log_a.T  # D x J: log P(observed | h), eq. 2
    s_held = heldout.to_dense() @ log_a.T
    ll = float(np.sum(logsumexp(log_pi + s_obs + s_held, axis=1) - logsumexp(log_pi + s_obs, axis=1)))
    assert model.score(test) == pytest.approx(ll / heldout.n_tokens, rel=1e-5)


def test_score_uses_each_family_s_own_completion(fitted, split):
    _, test = split
    observed, heldout = test.completion_split("tokens", seed=SCORE_SEED)
    ptm = fitted["PTM"]  # PTM eq. 32: proportions with every topic allowed, then the held-out part
    assert ptm.score(test) == pytest.approx(ptm.heldout_log_likelihood(observed, heldout) / heldout.n_tokens, rel=1e-5)
    lida = fitted["LIDA"]  # LIDA eq. 45: topics sampled on the observed half with Φ fixed
    ll, n = lida.log_predictive(observed, heldout)
    assert lida.score(test) == pytest.approx(ll / n, rel=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_score_and_perplexity_agree(fitted, split, name):
    _, test = split
    model = fitted[name]
    ll, n = model.completion_score(test)
    assert n == test.completion_split("tokens", seed=SCORE_SEED)[1].n_tokens
    s = model.score(test)
    assert s == ll / n and np.isfinite(s) and s < 0
    assert model.score(test) == s  # deterministic
    assert model.perplexity(test) == pytest.approx(np.exp(-s), rel=1e-9)
    assert model.completion_score(test, seed=1) != (ll, n)  # another split


def test_score_leaves_out_unknown_words_and_short_documents(fitted):
    model = fitted["PLSA"]
    W = len(model.vocab_)
    rng = np.random.default_rng(0)
    dense = rng.poisson(2.0, size=(12, W))
    dense[:, 0] += 2
    base = model.score(dense)
    saved = model.phi_  # a shared model (tests/fitted_models.py): restored as it was
    # a word no topic produces: its held-out and observed tokens are left out
    model.phi_ = np.array(saved)
    model.phi_[3] = 0.0
    try:
        without = dense.copy()
        without[:, 3] = 0
        assert model.score(dense) == model.score(without)
    finally:
        model.phi_ = saved
    # documents of fewer than 2 tokens cannot be split: they are left out
    short = np.vstack([dense, np.eye(W, dtype=int)[:2]])
    ll, n = model.completion_score(short)
    assert (ll, n) == model.completion_score(dense)
    assert model.score(dense) == base
    with pytest.raises(ValueError, match="at least 2 tokens"):
        model.score(np.eye(W, dtype=int)[:3])


def test_grid_search_without_scoring_finds_the_number_of_topics():
    """The held-out score picks the true 10 bars among 2, 10 and 20 topics (20 overfits)."""
    corpus, _, _ = tj.datasets.make_bars(n_docs=240, doc_length=100, seed=3)
    # refit=False: the checks read the search, not a model refitted on the whole corpus
    search = GridSearchCV(tj.PLSA(max_iter=40, progress=False), {"n_components": [2, 10, 20]}, cv=3, refit=False)
    search.fit(corpus.to_sparse())
    assert search.best_params_ == {"n_components": 10}
    means = search.cv_results_["mean_test_score"]
    assert means[1] > max(means[0], means[2]) and np.all(means < 0)


# ============================================================================= partial_fit
def batches(corpus, size):
    return [corpus.subset(range(s, min(s + size, corpus.n_docs))) for s in range(0, corpus.n_docs, size)]


@pytest.mark.parametrize("regularizers", [None, [(R.decorrelate(), 50.0), (R.smooth_phi(), 0.5)]],
                         ids=["plsa", "artm"])
def test_partial_fit_is_the_online_algorithm(bars, tmp_path, regularizers):
    corpus, _ = bars
    store = online.write_store([corpus], tmp_path / "store", batch_size=40)
    fitted = online.fit_online(store, 6, passes=1, doc_passes=5, regularizers=regularizers, random_state=2,
                               progress=False)
    phi, history = fitted.phi_, fitted.history_
    model = tj.ARTM(6, regularizers=regularizers, doc_passes=5, random_state=2, progress=False, scores=())
    for b in batches(corpus, 40):
        assert model.partial_fit(b) is model
    np.testing.assert_allclose(model.phi_, phi, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose([h["objective"] for h in model.history_], [h["objective"] for h in history], rtol=1e-5)
    np.testing.assert_allclose([h["rho"] for h in model.history_], [h["rho"] for h in history], rtol=1e-12)
    assert model.n_batch_iter_ == model.n_iter_ == 3 and model.theta_ is None
    np.testing.assert_allclose(model.components_.sum(1), 1, rtol=1e-5)
    assert model.transform(corpus).shape == (corpus.n_docs, 6)


def test_partial_fit_first_step_starts_where_fit_starts(bars):
    """The first batch starts from the Φ of ``fit``'s initialisation; with the whole corpus as one
    batch and ρ = 1 (learning_decay=0), one partial_fit is one offline pass of ARTM(doc_passes)."""
    corpus, _ = bars
    regs = [(R.decorrelate(), 20.0)]
    offline = tj.ARTM(7, regularizers=regs, max_iter=1, doc_passes=6, random_state=4, progress=False,
                      scores=()).fit(corpus)
    online_model = tj.ARTM(7, regularizers=regs, doc_passes=6, learning_decay=0.0, random_state=4,
                           progress=False).partial_fit(corpus)
    np.testing.assert_allclose(online_model.phi_, offline.phi_, rtol=1e-4, atol=1e-7)


def test_partial_fit_continues_and_restarts(bars):
    corpus, _ = bars
    b1, b2, b3 = batches(corpus, 40)
    model = tj.PLSA(5, random_state=0, progress=False).partial_fit(b1).partial_fit(b2)
    assert model.n_batch_iter_ == 2 and len(model.history_) == 2
    # a model fitted by fit() continues from its Φ (a new online fit: counts start empty)
    fitted = tj.PLSA(5, max_iter=30, random_state=0, progress=False).fit(corpus)
    before = fitted.phi_.copy()
    fitted.partial_fit(b3)
    assert fitted.n_batch_iter_ == 1 and fitted.theta_ is None
    assert np.abs(fitted.phi_ - before).max() < 0.2  # close to where it started: one batch of a converged model
    # fit() after partial_fit replaces the model, and the next partial_fit starts from it
    model.fit(corpus)
    assert model.theta_.shape == (5, corpus.n_docs)
    model.partial_fit(b1)
    assert model.n_batch_iter_ == 1


def test_partial_fit_errors(bars):
    corpus, _ = bars
    model = tj.PLSA(5, progress=False).partial_fit(corpus.to_sparse()[:30])
    with pytest.raises(ValueError, match="X has 3 features, but PLSA is expecting 25 features"):
        model.partial_fit(np.ones((4, 3), int))
    links = R.document_links(sp.eye(30, format="csr"))
    with pytest.raises(ValueError, match="particular documents"):
        tj.ARTM(5, regularizers=[(links, 1.0)], progress=False).partial_fit(corpus.subset(range(30)))
    with pytest.raises(ValueError, match="learning_decay must be a number >= 0.0"):
        tj.PLSA(5, learning_decay=-1.0, progress=False).partial_fit(corpus)
    with pytest.raises(ValueError, match="one modality"):
        tj.ARTM(5, modality_weights={"words": 1.0}, progress=False).partial_fit(corpus)


# ============================================================================= vocabulary, names
def texts_of(corpus):
    return [" ".join(w for w, c in zip(corpus.vocab, row) for _ in range(c)) for row in corpus.to_dense()]


def test_pipeline_keeps_the_vectorizer_vocabulary(bars):
    from sklearn.feature_extraction.text import CountVectorizer

    corpus, _ = bars
    texts = texts_of(corpus)
    pipe = make_pipeline(CorpusVectorizer(CountVectorizer()), tj.PLSA(10, max_iter=30, progress=False)).fit(texts)
    vec = pipe[0].vectorizer_
    assert pipe[-1].vocab_ == list(vec.get_feature_names_out())
    top = pipe[-1].top_words(5)
    assert all(w in corpus.vocab for ws in top for w in ws)
    # a bar's five pixels share a row or a column: the words are real pixel names
    assert any(len({w[:2] for w in ws}) == 1 or len({w[2:] for w in ws}) == 1 for ws in top)
    assert pipe.transform(texts[:4]).shape == (4, 10)
    assert list(pipe.get_feature_names_out()) == [f"topic_{i}" for i in range(10)]
    assert np.isfinite(pipe.score(texts[:20]))
    # the vectorizer's parameters are reachable by a grid search
    assert "corpusvectorizer__vectorizer__min_df" in pipe.get_params()
    # a bare CountVectorizer passes no names: the model says so
    bare = make_pipeline(CountVectorizer(), tj.PLSA(10, max_iter=5, progress=False)).fit(texts)
    with pytest.warns(UserWarning, match="placeholders w0, w1"):
        bare[-1].top_words()


def test_dataframe_columns_are_the_vocabulary(bars):
    pd = pytest.importorskip("pandas")
    corpus, _ = bars
    df = pd.DataFrame(corpus.to_dense(), columns=list(corpus.vocab))
    model = tj.PLSA(10, max_iter=20, progress=False).fit(df)
    assert model.vocab_ == list(corpus.vocab) and list(model.feature_names_in_) == list(corpus.vocab)
    np.testing.assert_allclose(model.transform(df), model.transform(corpus), rtol=1e-6)
    with pytest.raises(ValueError, match="feature names"):
        model.transform(df.rename(columns={"r0c0": "other"}))
    sparse_df = pd.DataFrame.sparse.from_spmatrix(corpus.to_sparse(), columns=list(corpus.vocab))
    assert tj.PLSA(10, max_iter=20, progress=False).fit(sparse_df).vocab_ == list(corpus.vocab)
    # set_output: topic proportions as a DataFrame named by topic
    out = model.set_output(transform="pandas").transform(df)
    assert list(out.columns) == [f"topic_{i}" for i in range(10)] and list(out.index) == list(df.index)
    # a Corpus after a DataFrame forgets the DataFrame's names
    assert not hasattr(tj.PLSA(10, max_iter=5, progress=False).fit(df).fit(corpus), "feature_names_in_")


@pytest.mark.parametrize("name", NAMES)
def test_feature_names_out(fitted, name):
    m = fitted[name]
    names = m.get_feature_names_out()
    assert names.dtype == object and names.shape == (np.shape(m.phi_)[1],)
    expected = ([f"topic_{i}" for i in range(fm.T)] if name in ("PLSA", "ARTM")
                else [f"{name.lower()}{i}" for i in range(fm.T)])
    assert list(names) == expected
    with pytest.raises(ValueError, match="input_features should have length"):
        m.get_feature_names_out(["a"])


@pytest.mark.parametrize("name", NAMES)
def test_unfitted_and_bad_input(name, split):
    train, _ = split
    est = FAMILIES[name]()
    for method in ("transform", "score", "perplexity", "get_feature_names_out"):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            getattr(est, method)(*(() if method == "get_feature_names_out" else (train,)))
    X = train.to_dense()
    for bad, message in [(np.where(X > 0, np.nan, 0.0), "Input X contains NaN"),
                         (X * 1.0 + np.where(X > 0, np.inf, 0.0), "Input X contains infinity"),
                         (-X, "Negative values in data passed to"),
                         (X + 0.5, "is not an integer"),
                         (X[:, :0], r"0 feature\(s\)"),
                         (X[0], "Expected 2D array")]:
        with pytest.raises(ValueError, match=message):
            FAMILIES[name]().fit(bad)


# ============================================================================= properties on counts
@pytest.mark.parametrize("name", NAMES)
def test_pickle_idempotence_order_and_subsets(fitted, split, name):
    """What scikit-learn's pickle / idempotence / sample-order / subset checks verify, on count
    data and on ``transform`` (for ARTM and PLSA those checks also compare ``predict``, which
    returns class names)."""
    train, test = split
    m = fitted[name]
    out = m.transform(test)
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.transform(test), out)
    again = FAMILIES[name](random_state=0).fit(train)
    np.testing.assert_array_equal(again.transform(test), out)
    if name == "LIDA":
        return  # its transform samples the topics of the batch's tokens: another order or subset, other draws
    perm = np.random.default_rng(0).permutation(test.n_docs)
    np.testing.assert_allclose(m.transform(test.subset(perm)), out[perm], rtol=1e-5, atol=1e-6)
    half = np.arange(test.n_docs // 2)
    np.testing.assert_allclose(m.transform(test.subset(half)), out[half], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_input_forms_agree(fitted, split, name):
    _, test = split
    m = fitted[name]
    ref = m.transform(test)
    dense = test.to_dense()
    for X in (dense.astype(np.int32), dense.astype(np.float32), np.asfortranarray(dense), dense.astype(object),
              sp.csr_matrix(dense), sp.csc_matrix(dense), sp.coo_matrix(dense), sp.csr_array(dense)):
        np.testing.assert_allclose(m.transform(X), ref, rtol=1e-6, atol=1e-7)
    readonly = dense.copy()
    readonly.flags.writeable = False
    np.testing.assert_allclose(m.transform(readonly), ref, rtol=1e-6, atol=1e-7)


# ============================================================================= scikit-learn's checks
_INTEGER = "counts are integers: the check's real-valued data is an error naming the document and word"
_PREDICT_NAMES = ("predict returns class names, strings '0', '1', ... of the integer labels y given to fit "
                  "(ARTM Theorem 3), which the check compares numerically")
_NOT_CLASSIFIER = ("the estimator has predict_proba (ARTM classes / TTMM themes) without being a classifier; "
                   "the check reads classifier tags it does not have")
_FIT_THETA = ("fit_transform returns the Θ the fit ended with (the estimator contract: theta_.T); transform "
              "re-infers Θ with Φ fixed, from uniform, in transform_iter iterations: they differ by more than "
              "the check's 1e-2")

# checks whose data is real numbers (before any estimator-specific reason)
_FLOAT_CHECKS = [
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
    "check_estimators_dtypes", "check_dtype_object", "check_pipeline_consistency", "check_estimators_nan_inf",
    "check_estimator_sparse_tag", "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_transformer_data_not_an_array",
    "check_transformer_general", "check_transformer_n_iter", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
]
FLOAT_DATA = {name: dict.fromkeys(_FLOAT_CHECKS, _INTEGER) for name in NAMES}

ON_COUNTS = {
    "PLSA": {"check_estimator_sparse_array": _NOT_CLASSIFIER, "check_estimator_sparse_matrix": _NOT_CLASSIFIER,
             "check_estimators_pickle": _PREDICT_NAMES, "check_methods_sample_order_invariance": _PREDICT_NAMES,
             "check_methods_subset_invariance": _PREDICT_NAMES, "check_fit_idempotent": _PREDICT_NAMES,
             "check_transformer_general": _FIT_THETA, "check_transformer_data_not_an_array": _FIT_THETA},
    "PTM": {"check_transformer_general": _FIT_THETA, "check_transformer_data_not_an_array": _FIT_THETA},
    "TTMM": {"check_estimator_sparse_array": _NOT_CLASSIFIER, "check_estimator_sparse_matrix": _NOT_CLASSIFIER},
    "LIDA": {"check_transformer_general": _FIT_THETA, "check_transformer_data_not_an_array": _FIT_THETA},
}
ON_COUNTS["ARTM"] = ON_COUNTS["PLSA"]

CHECKED = {
    "PLSA": tj.PLSA(3, max_iter=3, progress=False),
    # learning_offset 1: the check's partial_fit on 10 documents weights them by rho = 1 (the default
    # 1024^-0.7 = 0.008 leaves 0.4 tokens against decorrelation 1.0: every topic removed, a NumericalError)
    "ARTM": tj.ARTM(3, max_iter=3, regularizers=[(R.decorrelate(), 1.0)], learning_offset=1.0, progress=False,
                    scores=()),
    "PTM": tj.PTM(2, max_iter=2, progress=False),
    "TTMM": tj.TTMM(3, n_themes=2, max_iter=3, progress=False),
    # hyperparameters fixed: their sampler (tests/lida) compiles as long as the rest of a fit, for every shape
    "LIDA": tj.LIDA(3, variant="lda", max_iter=4, sample_hyper=False, progress=False),
}


def _expected(table):
    return lambda est: table[type(est).__name__]


#: tokens per feature of every document made by :func:`as_counts`
TOKENS_PER_WORD = 4


def as_counts(A):
    """Non-negative data as counts: every document ``TOKENS_PER_WORD x n_features`` tokens, one of
    each word and the rest spread over the words in proportion to ``A - min A`` (largest
    remainders, ties to the first word).  Every count matrix of ``n`` documents over ``m`` words is
    then dense with the same document lengths, so the checks' data of one shape share one set of
    compiled programs (a fit's programs depend on the number of non-zeros and tokens), and the
    documents of a matrix transformed one row at a time share one shape too."""
    if sp.issparse(A):
        return type(A)(as_counts(A.toarray()))
    A = np.asarray(A)
    if A.ndim != 2 or 0 in A.shape:
        return A
    n_words = A.shape[1]
    spread = (TOKENS_PER_WORD - 1) * n_words
    weight = np.asarray(A - A.min(), np.float64)
    total = weight.sum(1, keepdims=True)
    weight = np.where(total > 0, weight / np.where(total > 0, total, 1), 1.0 / n_words) * spread
    C = np.floor(weight)
    short = (spread - C.sum(1)).astype(int)  # tokens left: one more for the largest remainders
    order = np.argsort(-(weight - C), axis=1, kind="stable")
    for d in range(A.shape[0]):
        C[d, order[d, :short[d]]] += 1
    return (C + 1).astype(A.dtype)


def counts_X(estimator, X, X_test=None, kernel=None):
    X = as_counts(X)
    return X if X_test is None else (X, as_counts(X_test))


@pytest.fixture
def count_data(monkeypatch):
    import sklearn.utils.estimator_checks as ec

    if not hasattr(ec, "_enforce_estimator_tags_X"):
        pytest.skip("this scikit-learn has no _enforce_estimator_tags_X to turn the checks' data into counts")
    monkeypatch.setattr(ec, "_enforce_estimator_tags_X", counts_X)


def _sklearn_checks(table):
    from sklearn.utils.estimator_checks import parametrize_with_checks

    return parametrize_with_checks(list(CHECKED.values()), expected_failed_checks=_expected(table), xfail_strict=True)


def run_check(check, estimator, request):
    """Run one of scikit-learn's checks.  An expected failure (marked ``xfail`` by
    ``parametrize_with_checks`` from the tables above) fails with its own exception and message but
    without its traceback: pytest formats the traceback of every failure, also that of an expected
    one, which it never shows, and through scikit-learn's and topicjax's frames that took about half
    a second of CPU per check, for ~170 expected failures.  Any other failure keeps its traceback."""
    if request.node.get_closest_marker("xfail") is None:
        check(estimator)
        return
    try:
        check(estimator)
    except Exception as e:
        raise e.with_traceback(None) from None


@_sklearn_checks(FLOAT_DATA)
def test_sklearn_checks(estimator, check, request):
    run_check(check, estimator, request)


@pytest.mark.slow
@_sklearn_checks(ON_COUNTS)
def test_sklearn_checks_on_counts(estimator, check, count_data, request):
    run_check(check, estimator, request)
