"""Bridge to gensim: ``Dictionary`` + bag-of-words corpora both ways, topics for ``CoherenceModel``.

gensim is an optional extra (``pip install topicjax[interop]``); it is imported only inside these
functions.

* :func:`to_gensim` / :func:`from_gensim`: a :class:`~topicjax.data.corpus.Corpus` as a gensim
  ``Dictionary`` (id ``i`` is ``vocab[i]``; ``dfs``, ``cfs``, ``num_docs``, ``num_pos``,
  ``num_nnz`` filled) and a list of ``[(word_id, count), ...]`` documents, and back;
* :func:`gensim_topics`: the top words of every topic, for ``CoherenceModel(topics=...)``;
* :class:`GensimTopicModel`: a thin adapter with ``get_topics()`` (T x W, rows summing to one)
  and ``id2word``, so that ``CoherenceModel(model=GensimTopicModel(model), texts=...)`` works.

Topics that are all zero (removed during fitting, or zeroed by sparsing) have no top words; both
:func:`gensim_topics` and :class:`GensimTopicModel` leave them out by default
(``drop_empty=True``) and say which topics they kept (``topic_ids``).

>>> from topicjax import Corpus
>>> from topicjax.interop.gensim import to_gensim, from_gensim
>>> c = Corpus.from_dense([[2, 0, 1], [0, 1, 0]], vocab=["b", "a", "c"])
>>> dictionary, bow = to_gensim(c)
>>> dictionary.token2id, bow
({'b': 0, 'a': 1, 'c': 2}, [[(0, 2), (2, 1)], [(1, 1)]])
>>> from_gensim(bow, dictionary).equals(c)
True
"""

from __future__ import annotations

import numpy as np

from topicjax.core.validation import check_int
from topicjax.data.corpus import Corpus
from topicjax.interop.common import model_vocab, topic_word_matrix

__all__ = ["to_gensim", "from_gensim", "gensim_dictionary", "gensim_topics", "GensimTopicModel"]


def gensim_dictionary(vocab, corpus: Corpus | None = None):
    """A gensim ``Dictionary`` whose id ``i`` is ``vocab[i]``; document and collection frequencies
    from ``corpus`` when given (zeros otherwise)."""
    from gensim.corpora import Dictionary

    vocab = [str(w) for w in vocab]
    if len(set(vocab)) != len(vocab):
        raise ValueError("the vocabulary repeats a word; a gensim Dictionary maps each word to one id")
    if corpus is not None and tuple(vocab) != corpus.vocab:
        raise ValueError("vocab and corpus.vocab differ; re-index the corpus with corpus.with_vocab(vocab)")
    bow = [] if corpus is None else corpus.to_lists()
    d = Dictionary.from_corpus(bow, id2word=dict(enumerate(vocab)))
    if corpus is not None:
        d.cfs = {i: int(n) for i, n in enumerate(corpus.word_counts)}
    else:
        d.cfs = {i: 0 for i in range(len(vocab))}
    d.id2token = dict(enumerate(vocab))
    return d


def to_gensim(corpus: Corpus):
    """``(Dictionary, bow)``: gensim's view of ``corpus`` (word ids unchanged)."""
    if not isinstance(corpus, Corpus):
        raise TypeError(f"expected a Corpus, got {type(corpus).__name__}")
    return gensim_dictionary(corpus.vocab, corpus), corpus.to_lists()


def from_gensim(bow, dictionary, **kwargs) -> Corpus:
    """A :class:`~topicjax.data.corpus.Corpus` from gensim documents ``[(word_id, count), ...]`` and
    their ``Dictionary`` (or any ``id -> word`` mapping).

    Ids need not be contiguous (a ``Dictionary`` filtered without ``compactify``): the vocabulary
    is the dictionary's words in increasing id order.  Counts must be whole numbers (a tf-idf
    corpus is rejected, naming the entry).  ``kwargs`` go to :meth:`Corpus.from_entries`
    (``empty_docs="drop"``, ``labels``...).
    """
    id2word = {int(i): str(w) for i, w in dictionary.items()}
    ids = np.array(sorted(id2word), np.int64)
    remap = {int(i): n for n, i in enumerate(ids)}

    def new_id(w, d):
        try:
            return remap[int(w)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"document {d}: word id {w!r} is not in the dictionary") from None

    def remapped():  # Corpus.from_lists checks the pairs and counts and names the document
        for d, doc in enumerate(bow):
            yield [(new_id(item[0], d), item[1]) if isinstance(item, (tuple, list)) and len(item) == 2 else item
                   for item in doc]

    return Corpus.from_lists(remapped(), vocab=[id2word[int(i)] for i in ids], **kwargs)


def _live(matrix: np.ndarray, drop_empty: bool) -> np.ndarray:
    alive = matrix.sum(1) > 0
    if not drop_empty and not alive.all():
        raise ValueError(f"topics {np.flatnonzero(~alive).tolist()} are all zero (removed or zeroed); they have "
                         "no top words (use drop_empty=True to leave them out)")
    return np.flatnonzero(alive)


def gensim_topics(model, top_n: int = 10, *, drop_empty: bool = True) -> list[list[str]]:
    """Top ``top_n`` words of every topic (most probable first), for ``CoherenceModel(topics=...)``.

    All-zero topics are left out (``drop_empty=True``; the kept ones are
    ``GensimTopicModel(model).topic_ids``) or make an error."""
    top_n = check_int(top_n, "top_n", 1)
    m = topic_word_matrix(model)
    vocab = model_vocab(model)
    keep = _live(m, drop_empty)
    order = np.argsort(-m[keep], axis=1, kind="stable")[:, :top_n]
    return [[vocab[i] for i in row] for row in order]


class GensimTopicModel:
    """A fitted topicjax model seen as a gensim topic model (``BaseTopicModel``'s ``get_topics``).

    ``get_topics()`` is the ``(T, W)`` matrix of p(w|t) (rows summing to one) of the live topics
    (``topic_ids``: their indices in the model); ``id2word`` is a ``Dictionary`` of the model's
    vocabulary (ids = positions in ``vocab_``), so ``CoherenceModel(model=adapter, texts=...,
    coherence="c_v")`` needs no ``dictionary``.  ``show_topic(t, topn)`` and ``num_topics`` as in
    gensim.
    """

    def __init__(self, model, *, drop_empty: bool = True, corpus: Corpus | None = None):
        matrix = topic_word_matrix(model)
        self.topic_ids = _live(matrix, drop_empty)
        self._topics = matrix[self.topic_ids]
        self.vocab = model_vocab(model)
        self.id2word = gensim_dictionary(self.vocab, corpus)
        self.num_topics = int(self.topic_ids.size)
        self.model = model

    def get_topics(self) -> np.ndarray:
        return self._topics.copy()

    def show_topic(self, topicid: int, topn: int = 10) -> list[tuple[str, float]]:
        topn = check_int(topn, "topn", 1)
        topicid = check_int(topicid, "topicid", 0, self.num_topics - 1)  # row -1 would be the last topic
        row = self._topics[topicid]
        order = np.argsort(-row, kind="stable")[:topn]
        return [(self.vocab[i], float(row[i])) for i in order]

    def __repr__(self) -> str:
        return (f"GensimTopicModel({type(self.model).__name__}, num_topics={self.num_topics}, "
                f"num_terms={len(self.vocab)})")
