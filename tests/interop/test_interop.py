"""Bridges to gensim, pyLDAvis and OCTIS: the structures they expect, and acceptance by the real
libraries where they are installed (those tests skip cleanly otherwise)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from topicjax import PLSA, Corpus
from topicjax.evaluation.coherence import reference_coherence
from topicjax.evaluation.reference_texts import ReferenceTexts
from topicjax.interop.common import fitted_doc_topics, topic_word_matrix
from topicjax.interop.octis import OCTIS_AVAILABLE, OCTISModel, corpus_from_tokens, octis_output
from topicjax.interop.pyldavis import to_pyldavis


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def texts() -> list[list[str]]:
    """60 documents drawn from three themes of 10 words each (ordered token lists)."""
    rng = np.random.default_rng(0)
    themes = [[f"{name}{i}" for i in range(10)] for name in ("sea", "sky", "cat")]
    docs = []
    for _ in range(60):
        mix = rng.dirichlet(np.full(3, 0.3))
        theme = rng.choice(3, size=rng.integers(30, 60), p=mix)
        docs.append([themes[t][rng.integers(0, 10)] for t in theme])
    return docs


@pytest.fixture(scope="module")
def corpus(texts) -> Corpus:
    return Corpus.from_texts([" ".join(t) for t in texts], token_pattern=r"\S+")


@pytest.fixture(scope="module")
def model(corpus):
    return PLSA(n_components=4, max_iter=40, random_state=0, progress=False).fit(corpus)


class Fitted:
    """A duck-typed fitted model: topic 1 removed (zero column and zero row of Θ), and words
    zeroed in every topic by sparsing."""

    def __init__(self, vocab, n_docs, seed=0):
        rng = np.random.default_rng(seed)
        W, T = len(vocab), 3
        phi = rng.dirichlet(np.full(W, 0.5), size=T).T
        phi[:, 1] = 0.0
        phi[:3] = 0.0
        self.phi_ = phi / np.maximum(phi.sum(0), 1e-300)
        theta = rng.dirichlet(np.ones(T), size=n_docs).T
        theta[1] = 0.0
        self.theta_ = theta / theta.sum(0)
        self.vocab_ = list(vocab)

    def transform(self, X):
        return np.tile(self.theta_[:, 0], (X.n_docs, 1))


# ------------------------------------------------------------------ common
def test_topic_word_matrix_rows_sum_to_one_and_get_topics_wins(model, corpus):
    m = topic_word_matrix(model)
    assert m.shape == (4, corpus.n_words)
    np.testing.assert_allclose(m.sum(1), 1.0, atol=1e-6)
    np.testing.assert_allclose(m, np.asarray(model.phi_).T / np.asarray(model.phi_).sum(0)[:, None], atol=1e-7)
    fake = Fitted(corpus.vocab, corpus.n_docs)
    z = topic_word_matrix(fake)
    assert np.all(z[1] == 0) and np.allclose(z[[0, 2]].sum(1), 1.0)

    class WithGetTopics(Fitted):
        def get_topics(self):
            return np.full((2, len(self.vocab_)), 3.0)

    g = topic_word_matrix(WithGetTopics(corpus.vocab, corpus.n_docs))
    np.testing.assert_allclose(g, 1.0 / corpus.n_words)
    with pytest.raises(TypeError, match="not a fitted topic model"):
        topic_word_matrix(PLSA())
    assert fitted_doc_topics(model, corpus).shape == (corpus.n_docs, 4)
    with pytest.raises(ValueError, match="theta_ has 60 documents but the corpus has 3"):
        fitted_doc_topics(model, corpus_from_tokens([["sea1"], ["sky2"], ["cat3"]], corpus.vocab), "fitted")


# ------------------------------------------------------------------ pyLDAvis
def test_to_pyldavis_arguments(model, corpus):
    args = to_pyldavis(model, corpus)
    assert set(args) == {"topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab", "term_frequency"}
    assert args["topic_term_dists"].shape == (4, corpus.n_words)
    assert args["doc_topic_dists"].shape == (corpus.n_docs, 4)
    np.testing.assert_allclose(args["topic_term_dists"].sum(1), 1.0, atol=1e-9)
    np.testing.assert_allclose(args["doc_topic_dists"].sum(1), 1.0, atol=1e-9)
    assert args["doc_lengths"].tolist() == corpus.doc_lengths.tolist()
    assert args["term_frequency"].tolist() == corpus.word_counts.tolist() and args["vocab"] == list(corpus.vocab)
    # other documents are folded in by the model
    other = corpus_from_tokens([["sea1", "sea2", "sky3"], ["cat1"]], corpus.vocab)
    assert to_pyldavis(model, other)["doc_topic_dists"].shape == (2, 4)


def test_to_pyldavis_drops_empty_topics_and_says_so(corpus):
    fake = Fitted(corpus.vocab, corpus.n_docs)
    with pytest.warns(UserWarning, match=r"topics \[1\] are empty"):
        args, kept = to_pyldavis(fake, corpus, return_topics=True)
    assert kept.tolist() == [0, 2] and args["topic_term_dists"].shape == (2, corpus.n_words)
    np.testing.assert_allclose(args["doc_topic_dists"].sum(1), 1.0)
    with pytest.raises(ValueError, match=r"topics \[1\] are empty"):
        to_pyldavis(fake, corpus, empty_topics="error")
    with pytest.warns(UserWarning):
        smooth = to_pyldavis(fake, corpus, smooth=1e-6)["topic_term_dists"]
    assert np.all(smooth > 0) and np.allclose(smooth.sum(1), 1.0)
    with pytest.raises(ValueError, match="with_vocab"):
        to_pyldavis(fake, corpus_from_tokens([["a"]], ["a"]))


def test_pyldavis_prepare_accepts_the_arguments(model, corpus):
    pyLDAvis = pytest.importorskip("pyLDAvis")
    vis = pyLDAvis.prepare(**to_pyldavis(model, corpus), n_jobs=1, R=10)
    assert len(vis.topic_coordinates) == 4
    assert "NaN" not in vis.to_json()
    fake = Fitted(corpus.vocab, corpus.n_docs)  # a removed topic and words zeroed in every topic
    for smooth in (0.0, 1e-9):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vis = pyLDAvis.prepare(**to_pyldavis(fake, corpus, smooth=smooth), n_jobs=1, R=10)
        assert len(vis.topic_coordinates) == 2
        assert "NaN" not in vis.to_json() and "Infinity" not in vis.to_json()


# ------------------------------------------------------------------ OCTIS
class Dataset:
    """OCTIS's Dataset interface (get_corpus, get_vocabulary, get_partitioned_corpus)."""

    def __init__(self, docs, vocab, last_training_doc=None):
        self.docs, self.vocab, self.last = docs, vocab, last_training_doc

    def get_corpus(self):
        return self.docs

    def get_vocabulary(self):
        return self.vocab

    def get_partitioned_corpus(self, use_validation=True):
        if self.last is None:
            return [self.docs]
        return self.docs[: self.last], self.docs[self.last:]


def test_octis_output_dict(model, corpus):
    test = corpus_from_tokens([["sea1", "sea2"], ["cat1", "sky2"]], corpus.vocab)
    out = octis_output(model, top_words=5, test=test)
    assert set(out) == {"topics", "topic-word-matrix", "topic-document-matrix", "test-topic-document-matrix"}
    assert out["topic-word-matrix"].shape == (4, corpus.n_words)
    assert out["topic-document-matrix"].shape == (4, corpus.n_docs)
    assert out["test-topic-document-matrix"].shape == (4, 2)
    np.testing.assert_allclose(out["topic-word-matrix"].sum(1), 1.0, atol=1e-9)
    np.testing.assert_allclose(out["topic-document-matrix"].sum(0), 1.0, atol=1e-6)
    np.testing.assert_allclose(out["test-topic-document-matrix"], np.asarray(model.transform(test)).T, atol=1e-6)
    assert out["topics"] == [row[:5] for row in model.top_words(5)]
    assert "topics" not in octis_output(model, top_words=0)
    fake = Fitted(corpus.vocab, corpus.n_docs)
    with pytest.warns(UserWarning, match=r"topics \[1\] are all zero"):
        out, kept = octis_output(fake, return_topics=True)
    assert kept.tolist() == [0, 2] and len(out["topics"]) == 2 and out["topic-document-matrix"].shape[0] == 2
    np.testing.assert_allclose(out["topic-document-matrix"].sum(0), 1.0)


def test_octis_model_wrapper_trains_on_a_dataset(texts, corpus):
    dataset = Dataset(texts, list(corpus.vocab), last_training_doc=50)
    wrapper = OCTISModel(PLSA(max_iter=20, progress=False), num_topics=3)
    out = wrapper.train_model(dataset, {"random_state": 1}, top_words=4)
    assert out["topic-word-matrix"].shape == (3, corpus.n_words)
    assert out["topic-document-matrix"].shape == (3, 50)
    assert out["test-topic-document-matrix"].shape == (3, 10)
    assert all(len(t) == 4 for t in out["topics"])
    assert wrapper.model.n_components == 3 and wrapper.model.random_state == 1
    assert wrapper.hyperparameters == {"num_topics": 3, "random_state": 1}
    assert "num_topics" in wrapper.hyperparameters_info()
    wrapper.partitioning(False)
    assert "test-topic-document-matrix" not in wrapper.train_model(dataset)
    assert wrapper.train_model(dataset)["topic-document-matrix"].shape == (3, 60)
    with pytest.raises(ValueError, match="has no parameter"):
        wrapper.train_model(dataset, {"bogus": 1})
    with pytest.raises(ValueError, match="training document 1 has no word"):
        OCTISModel(PLSA(progress=False)).train_model(Dataset([["sea1"], ["zzz"]], list(corpus.vocab)))
    with pytest.raises(TypeError, match="estimator"):
        OCTISModel("PLSA")


@pytest.mark.skipif(not OCTIS_AVAILABLE, reason="OCTIS is not installed (it pins numpy<2, scikit-learn==1.1.0; "
                    "`pip install --no-deps octis` is enough for these checks)")
def test_octis_accepts_the_wrapper_and_its_output(texts, corpus, tmp_path):
    from octis.dataset.dataset import Dataset as OCTISDataset
    from octis.evaluation_metrics.diversity_metrics import InvertedRBO, TopicDiversity
    from octis.models.model import AbstractModel, load_model_output, save_model_output

    wrapper = OCTISModel(PLSA(max_iter=20, progress=False), num_topics=3)
    assert isinstance(wrapper, AbstractModel)
    dataset = OCTISDataset(corpus=texts, vocabulary=list(corpus.vocab), metadata={"last-training-doc": 50})
    out = wrapper.train_model(dataset, top_words=5)
    assert out["topic-document-matrix"].shape == (3, 50) and out["test-topic-document-matrix"].shape == (3, 10)
    assert 0 < TopicDiversity(topk=5).score(out) <= 1
    assert 0 <= InvertedRBO(topk=5).score(out) <= 1
    save_model_output(out, str(tmp_path / "out"))
    back = load_model_output(str(tmp_path / "out.npz"))
    assert sorted(back) == sorted(out)
    np.testing.assert_allclose(back["topic-word-matrix"], out["topic-word-matrix"], atol=1e-7)


# ------------------------------------------------------------------ gensim
def test_gensim_corpus_round_trip(corpus):
    pytest.importorskip("gensim")
    from gensim.test.utils import common_corpus, common_dictionary

    from topicjax.interop.gensim import from_gensim, to_gensim

    dictionary, bow = to_gensim(corpus)
    assert [dictionary[i] for i in range(len(dictionary))] == list(corpus.vocab)
    assert dictionary.num_docs == corpus.n_docs and dictionary.num_pos == corpus.n_tokens
    assert dictionary.num_nnz == corpus.nnz
    assert [dictionary.dfs[i] for i in range(corpus.n_words)] == corpus.doc_frequency.tolist()
    assert [dictionary.cfs[i] for i in range(corpus.n_words)] == corpus.word_counts.tolist()
    assert dictionary.doc2bow(["sea1", "sea1", "cat0"]) == sorted([(corpus.vocab.index("sea1"), 2),
                                                                   (corpus.vocab.index("cat0"), 1)])
    assert from_gensim(bow, dictionary).equals(corpus)
    theirs = from_gensim(common_corpus, common_dictionary)
    assert theirs.n_docs == len(common_corpus) and theirs.n_tokens == sum(c for d in common_corpus for _, c in d)
    assert theirs.vocab == tuple(common_dictionary[i] for i in range(len(common_dictionary)))
    gaps = from_gensim([[(7, 2), (3, 1)], [(3, 4)]], {3: "b", 7: "a"})  # ids need not be contiguous
    assert gaps.vocab == ("b", "a") and gaps.to_dense().tolist() == [[1, 2], [4, 0]]
    with pytest.raises(ValueError, match="document 1: word id 9"):
        from_gensim([[(3, 1)], [(9, 1)]], {3: "b"})
    with pytest.raises(ValueError, match="not an integer"):
        from_gensim([[(3, 0.5)]], {3: "b"})


def test_coherence_model_accepts_our_topics_and_adapter(model, texts):
    pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    from topicjax.interop.gensim import GensimTopicModel, gensim_topics

    topics = gensim_topics(model, top_n=8)
    assert topics == model.top_words(8)
    ref = ReferenceTexts.from_token_lists(texts)
    for measure in ("c_v", "u_mass", "c_npmi"):
        cm = CoherenceModel(topics=topics, texts=texts, dictionary=Dictionary(texts), coherence=measure,
                            topn=8, processes=1)
        by_topics = np.asarray(cm.get_coherence_per_topic())
        adapter = CoherenceModel(model=GensimTopicModel(model), texts=texts, coherence=measure, topn=8, processes=1)
        np.testing.assert_allclose(adapter.get_coherence_per_topic(), by_topics, rtol=0, atol=1e-12)
        np.testing.assert_allclose(reference_coherence(model, ref, measure=measure, top_n=8), by_topics, rtol=0, atol=1e-9)


def test_gensim_adapter_leaves_out_empty_topics(corpus):
    pytest.importorskip("gensim")
    from topicjax.interop.gensim import GensimTopicModel, gensim_topics

    fake = Fitted(corpus.vocab, corpus.n_docs)
    adapter = GensimTopicModel(fake)
    assert adapter.topic_ids.tolist() == [0, 2] and adapter.get_topics().shape == (2, corpus.n_words)
    assert adapter.show_topic(0, 3)[0][0] == gensim_topics(fake, 3)[0][0]
    assert len(adapter.id2word) == corpus.n_words
    with pytest.raises(ValueError, match=r"topics \[1\] are all zero"):
        gensim_topics(fake, drop_empty=False)
