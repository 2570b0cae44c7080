"""No silent empty or wrong results, and refusals before allocating (issue 40, items 3 and 4),
from the user's side:

* ``transform`` of documents with no word the model knows: every family returns a distribution
  (the topic distribution of no evidence) and a :class:`NoEvidenceWarning` names their rows of
  ``X``; ARTM documents that the Θ-regularizers leave without a topic get Θ of eq. 16 without
  them, said so;
* iteration counts of 0 (``fit_online(passes=0)``, ``fit_store(max_iter=0)``, ``infer_theta(n_iter=0)``)
  are refused naming the parameter;
* a regularizer that empties topics says so (:class:`EmptyTopicsWarning`, ``empty_topics_``),
  without NaN;
* numbers of topics, themes and phantom words whose arrays cannot fit are refused before anything
  is allocated, naming the parameter, the largest value that fits and the memory; sizes that fit
  are accepted.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.core import validation as V
from topicjax.data.corpus import Corpus, CorpusError
from topicjax.estimator import EmptyTopicsWarning, NoEvidenceWarning

UNSEEN = (0, 1)  # words of the vocabulary absent from the training documents


@pytest.fixture(scope="module")
def bars():
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
    return corpus


@pytest.fixture(scope="module")
def train(bars):
    keep = ~np.isin(bars.word_ids, UNSEEN)
    return Corpus.from_entries(bars.doc_ids[keep], bars.word_ids[keep], bars.counts[keep], vocab=bars.vocab,
                               n_docs=bars.n_docs)


def _new_docs(n_words: int) -> np.ndarray:
    """Four documents as a count matrix: 0 of unseen words only, 1 empty, 2 mixing an unseen and a
    known word, 3 of an unseen word only."""
    X = np.zeros((4, n_words), np.int64)
    X[0, [0, 1]] = [3, 2]
    X[2, [1, 7]] = [1, 2]
    X[3, 0] = 1
    return X


FAMILIES = {
    "PLSA": lambda: tj.PLSA(3, max_iter=3, progress=False),
    "ARTM": lambda: tj.ARTM(3, regularizers=[(R.decorrelate(), 1.0)], max_iter=3, progress=False, scores=()),
    "PTM": lambda: tj.PTM(3, max_iter=2, progress=False),
    "TTMM": lambda: tj.TTMM(3, n_themes=2, max_iter=2, progress=False),
    "LIDA": lambda: tj.LIDA(3, variant="lda", max_iter=4, progress=False),
}


@pytest.fixture(scope="module")
def fitted(train):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = FAMILIES[name]().fit(train)
        return cache[name]

    return get


def _expected_no_evidence(model) -> np.ndarray:
    """The topic distribution of no evidence, from each paper: uniform over the topics (EM of
    PLSA/ARTM and PTM start there and no token moves them; LDA's θ = α / Tα), TTMM's prior
    P(t) = Σ_j π_j τ_jt (eq. 18 with no words)."""
    if isinstance(model, tj.TTMM):
        prior = np.asarray(model.pi_, np.float64) @ np.asarray(model.tau_, np.float64)
        return prior / prior.sum()
    T = np.shape(model.phi_)[1]
    return np.full(T, 1.0 / T)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_documents_without_a_known_word_get_a_distribution_and_are_named(fitted, train, name):
    model = fitted(name)
    new = _new_docs(train.n_words)
    with pytest.warns(NoEvidenceWarning, match=r"documents 0, 3 of X have no word the model knows") as rec:
        theta = model.transform(new)
    assert len([w for w in rec if issubclass(w.category, NoEvidenceWarning)]) == 1
    assert theta.shape == (4, 3)
    assert np.all(np.isfinite(theta))
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)  # every row a distribution
    none = _expected_no_evidence(model)
    for d in (0, 1, 3):  # unseen words only, empty: no evidence
        np.testing.assert_allclose(theta[d], none, atol=1e-6)
    # "drop" leaves out the empty document only (the others have tokens), and names rows of X
    with pytest.warns(NoEvidenceWarning, match=r"documents 0, 3 of X"):
        dropped = model.transform(new, empty_docs="drop")
    assert dropped.shape == (3, 3)
    np.testing.assert_allclose(dropped.sum(1), 1.0, atol=1e-5)
    with pytest.raises(CorpusError, match=r"document 1 of X has no tokens"):
        model.transform(new, empty_docs="error")
    # a Corpus (it has no empty documents), and "error" for documents without a known word
    docs = Corpus.from_entries([0, 1, 1, 2], [0, 1, 7, 1], [2, 1, 2, 1], vocab=train.vocab, n_docs=3)
    with pytest.warns(NoEvidenceWarning, match=r"documents 0, 2 of X have no word the model knows"):
        theta = model.transform(docs)
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(theta[[0, 2]], np.stack([none, none]), atol=1e-6)
    with pytest.raises(CorpusError, match=r"documents 0, 2 of X have no word the model knows"):
        model.transform(docs, empty_docs="error")


def _em_theta(phi, counts, n_iter):
    """Θ of one document with Φ fixed by EM (ARTM eq. 16 with R = 0), a hand-written loop."""
    T = phi.shape[1]
    theta = np.full(T, 1.0 / T)
    words = np.flatnonzero(counts)
    for _ in range(n_iter):
        p = phi[words] @ theta
        n_t = theta * ((counts[words] / p) @ phi[words])
        theta = n_t / n_t.sum()
    return theta


def test_overregularized_new_documents_are_inferred_without_the_regularizers(bars):
    """sparse_theta at τ = 10 takes every topic from documents of 1-2 tokens (eq. 16: n_td - τα
    <= 0): their Θ would be all zeros; they get EM's Θ without the Θ-terms, with a warning."""
    model = tj.ARTM(6, regularizers=[(R.sparse_theta(), 10.0)], max_iter=5, progress=False, scores=(),
                    transform_iter=20).fit(bars)
    first = bars.subset([0])  # a training document: it keeps its topics
    new = Corpus.from_entries(np.r_[0, 1, 1, first.doc_ids + 2], np.r_[3, 4, 9, first.word_ids],
                              np.r_[1, 1, 1, first.counts], vocab=bars.vocab, n_docs=3)
    with pytest.warns(NoEvidenceWarning, match=r"documents 0, 1 of X: the regularizers \('sparse_theta'\) leave no "
                                               r"topic"):
        theta = model.transform(new)
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)
    phi = np.asarray(model.phi_, np.float64)
    dense = np.zeros((3, bars.n_words))
    np.add.at(dense, (new.doc_ids, new.word_ids), new.counts)
    for d in (0, 1):
        np.testing.assert_allclose(theta[d], _em_theta(phi, dense[d], 20), atol=2e-4)


# ----------------------------------------------------------------------------- iteration counts
def test_iteration_counts_of_zero_are_refused(bars, tmp_path):
    from topicjax.scale import offline, online

    store = online.write_store([bars], tmp_path / "store", batch_size=20)
    with pytest.raises(ValueError, match=r"^passes must be an integer >= 1, got 0$"):
        online.fit_online(store, 3, passes=0, progress=False)
    with pytest.raises(ValueError, match=r"^max_iter must be an integer >= 1, got 0$"):
        offline.fit_store(store, 3, max_iter=0, progress=False)
    with pytest.raises(ValueError, match=r"^n_iter must be an integer >= 1, got 0$"):
        next(online.infer_theta(store, np.full((bars.n_words, 3), 1.0 / bars.n_words), n_iter=0))
    for make in (lambda: tj.PLSA(3, max_iter=0), lambda: tj.PTM(3, max_iter=0), lambda: tj.TTMM(3, max_iter=0),
                 lambda: tj.LIDA(3, max_iter=0), lambda: tj.ARTM(3, transform_iter=0)):
        with pytest.raises(ValueError, match=r"(max_iter|transform_iter) must be an integer >= 1, got 0"):
            make().fit(bars)


# ----------------------------------------------------------------------------- emptied topics
@pytest.mark.parametrize("over", ["remove", "keep"])
def test_a_regularizer_that_empties_topics_says_so(bars, over):
    """sparse_phi on topics 0 and 1 with τ above every word's count: eq. 26, φ_wt ∝ (n_wt - τ)₊ with
    n_wt <= n_w < τ, zeroes both columns at the first iteration, whatever the initial Φ."""
    tau = float(np.asarray(bars.word_counts).max()) + 1.0
    model = tj.ARTM(6, regularizers=[(R.sparse_phi(topics=[0, 1]), tau)], max_iter=4, overregularized=over,
                    progress=False, scores=())
    with pytest.warns(EmptyTopicsWarning, match=r"2 of 6 topics ended the fit empty.*'topic_0' \(from iteration 1\), "
                                                r"'topic_1' \(from iteration 1\); regularizers: 'sparse_phi'"):
        model.fit(bars)
    assert model.empty_topics_ == ["topic_0", "topic_1"]
    assert model.removed_topics_ == (["topic_0", "topic_1"] if over == "remove" else [])
    for a in (model.phi_, model.theta_, model.components_):
        assert np.all(np.isfinite(a))
    np.testing.assert_array_equal(model.components_[:2], 0.0)
    np.testing.assert_allclose(model.components_[2:].sum(1), 1.0, atol=1e-5)
    theta = model.transform(bars.subset(np.arange(5)))
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(theta[:, :2], 0.0)


def test_no_warning_when_every_topic_lives(bars):
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyTopicsWarning)
        model = tj.PLSA(4, max_iter=3, progress=False).fit(bars)
    assert model.empty_topics_ == []


# ----------------------------------------------------------------------------- sizes against memory
GIB16 = (16 << 30, "a 16 GiB test machine")
NYTIMES = {"W": 102_660, "D": 300_000}


def _structure(W, D):
    return types.SimpleNamespace(n_rows=W, corpus=types.SimpleNamespace(n_docs=D))


def test_a_large_fit_that_fits_is_accepted_and_a_huge_one_refused(monkeypatch):
    """Φ (W x T) and Θ (T x D) in float32 and the step's counts of both: 8 (W + D) bytes per topic.
    NYTimes-sized, T = 1000 is 3.0 GiB (accepted on 16 GiB); T = 300,000 is 900 GiB, refused with
    the largest T that fits: floor(16 GiB / (8 (W + D)))."""
    monkeypatch.setattr(V, "machine_memory", lambda: GIB16)
    W, D = NYTIMES["W"], NYTIMES["D"]
    plsa = tj.PLSA(1000)
    plsa._refuse_sizes(_structure(W, D), 1000)  # no error
    largest = (16 << 30) // (8 * (W + D))
    plsa._refuse_sizes(_structure(W, D), largest)
    with pytest.raises(ValueError, match=rf"^n_components must be an integer <= {largest:,} here, got 300000: with "
                                         r"300,000 topics on 102,660 word rows and 300,000 documents, one PLSA fit "
                                         r"holds .* more than the 16.0 GiB of a 16 GiB test machine$"):
        plsa._refuse_sizes(_structure(W, D), 300_000)
    with pytest.raises(ValueError, match=rf"^n_components must be an integer <= {largest:,} here"):
        plsa._refuse_sizes(_structure(W, D), largest + 1)


def test_every_family_refuses_topics_that_cannot_fit_before_allocating(monkeypatch, bars):
    """On a machine of 3000 bytes: PLSA needs 8 (W + D) = 520 bytes per topic on 25 words and 40
    documents (largest 5); PTM 2 (9 W + 13 D) = 1490 (largest 2); TTMM with J = 3 themes 4 (3 J +
    3 W) per topic beside 4 (2 J W + D J) (largest 8); each refusal happens before the fit."""
    monkeypatch.setattr(V, "machine_memory", lambda: (3000, "a test machine"))
    cases = [(lambda: tj.PLSA(10, max_iter=1, progress=False), "n_components", 5),
             (lambda: tj.ARTM(10, max_iter=1, progress=False, scores=()), "n_components", 5),
             (lambda: tj.PTM(10, max_iter=1, progress=False), "n_components", 2),
             (lambda: tj.TTMM(10, n_themes=3, max_iter=1, progress=False), "n_components", 8)]
    for make, name, largest in cases:
        model = make()
        with pytest.raises(ValueError, match=rf"^{name} must be an integer <= {largest} here, got 10: .*a test "
                                             r"machine$"):
            model.fit(bars)
        assert not hasattr(model, "phi_")
    # a fit within the limit runs
    assert tj.PLSA(5, max_iter=1, progress=False).fit(bars).phi_.shape == (25, 5)
    with pytest.raises(ValueError, match=r"^n_topics must be an integer <= 2 here, got 10: .*3 ARTM fits hold"):
        tj.ARTM(4, max_iter=1, progress=False, scores=()).fit_many(bars, seeds=[0, 1, 2], n_topics=[4, 8, 10])


def test_ttmm_names_the_themes_when_they_are_the_large_part(monkeypatch):
    """J = 500,000 themes on 10,000 words and 50,000 documents: 4 (2 K + 2 W + D) bytes per theme
    (K = 10 topics: τ and the step's new τ; A and R; the posteriors) beside 4 (2 K W) for β and its
    new value, about 130 GiB; the message names n_themes and the largest J that fits."""
    monkeypatch.setattr(V, "machine_memory", lambda: GIB16)
    corpus = types.SimpleNamespace(n_words=10_000, n_docs=50_000)
    largest = ((16 << 30) - 4 * 2 * 10 * 10_000) // (4 * (2 * 10 + 2 * 10_000 + 50_000))
    with pytest.raises(ValueError, match=rf"^n_themes must be an integer <= {largest:,} here, got 500000"):
        tj.TTMM(10, n_themes=500_000)._refuse_sizes(corpus)
    tj.TTMM(10, n_themes=1000)._refuse_sizes(corpus)  # 0.3 GiB: accepted


def test_online_fits_refuse_topics_that_cannot_fit(monkeypatch, bars, tmp_path):
    from topicjax.scale import online

    store = online.write_store([bars], tmp_path / "store", batch_size=20)
    monkeypatch.setattr(V, "machine_memory", lambda: (3000, "a test machine"))
    # Φ, n_wt, the pending counts and a step's counts (4 W) and a batch's Θ and its counts (2 n_docs):
    # 4 (100 + 40) = 560 bytes per topic for batches of 20; partial_fit pads a batch to 32 documents
    with pytest.raises(ValueError, match=r"^n_components must be an integer <= 5 here, got 10: .*an online fit holds"):
        online.fit_online(store, 10, progress=False)
    with pytest.raises(ValueError, match=r"^n_components must be an integer <= 4 here, got 10"):
        tj.PLSA(10, progress=False).partial_fit(bars.subset(np.arange(20)))


def test_lida_names_the_phantom_words(monkeypatch, bars):
    """Two billion phantom rows: the count tables alone are 5 (D + R) K bytes, about 100 GiB at
    K = 10; refused before allocating, naming n_phantom (the fit without them fits)."""
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", "1GiB")
    model = tj.LIDA(10, variant="lida", vocabulary="infinite", n_phantom=2_000_000_000, max_iter=2, progress=False)
    with pytest.raises(ValueError, match=r"^n_phantom must be an integer <= [0-9,]+ here, got 2000000000: LIDA on "
                                         r"this corpus .* lower n_phantom"):
        model.fit(bars)
    from topicjax.lida import kernel
    from topicjax.lida.validators import memory_needed

    best = int(str(pytest.raises(ValueError, model.fit, bars).value).split("<= ")[1].split(" ")[0].replace(",", ""))
    lanes = not kernel.use_kernel(model._config(bars, 10, bars.n_words + 2_000_000_000))
    kw = dict(mode="parallel", loglik=True, lanes_layout=lanes, extras=False)
    sizes = (bars.n_tokens, bars.n_docs, bars.n_words, 10)
    assert memory_needed(*sizes, n_rows=bars.n_words + best, **kw) <= 1 << 30
    assert memory_needed(*sizes, n_rows=bars.n_words + best + 1, **kw) > 1 << 30
