"""Bridge to pyLDAvis: the keyword arguments of ``pyLDAvis.prepare``.

>>> import pyLDAvis                                                  # doctest: +SKIP
>>> from topicjax.interop.pyldavis import to_pyldavis
>>> vis = pyLDAvis.prepare(**to_pyldavis(model, corpus))            # doctest: +SKIP

pyLDAvis checks that every row of ``topic_term_dists`` and of ``doc_topic_dists`` sums to one,
and divides by each topic's share of the tokens.  A fitted topicjax model can break both: a topic
removed during fitting (ARTM's ``overregularized="remove"``) or zeroed by sparsing is an all-zero
column of Φ, and a topic no document uses has no tokens.  Such topics are *dropped* (a warning
names them; ``return_topics=True`` also returns the indices kept, which are the topics pyLDAvis
numbers 1..K before its own re-sorting), or ``empty_topics="error"`` refuses them.  The
document-topic rows are renormalised over the kept topics; a document with no weight left on
them is dropped too (warned), together with its length.

Sparsing also zeroes words in every topic.  pyLDAvis then computes 0·log 0 terms (NaN,
which it mostly skips); ``smooth=ε`` adds ε to every topic-word probability before renormalising
(a visual approximation: the matrix shown is then not exactly the model's).
"""

from __future__ import annotations

import warnings

import numpy as np

from topicjax.data.corpus import Corpus
from topicjax.interop.common import fitted_doc_topics, model_vocab, topic_word_matrix

__all__ = ["to_pyldavis"]


def to_pyldavis(
    model,
    corpus: Corpus,
    *,
    doc_topic="auto",
    empty_topics: str = "drop",
    smooth: float = 0.0,
    return_topics: bool = False,
):
    """``dict(topic_term_dists, doc_topic_dists, doc_lengths, vocab, term_frequency)`` for
    ``pyLDAvis.prepare(**result)``.

    Parameters
    ----------
    model:
        A fitted model (``phi_``/``get_topics()``, ``theta_``, ``vocab_``, ``transform``).
    corpus:
        The documents to show, over the model's vocabulary (re-index another one with
        ``corpus.with_vocab(model.vocab_)``).  ``doc_lengths`` and ``term_frequency`` are counted
        in it.
    doc_topic:
        Where p(t|d) comes from: ``"fitted"`` (``theta_``: ``corpus`` is the training corpus),
        ``"transform"`` (``model.transform(corpus)``), ``"auto"`` (``theta_`` when it has
        ``corpus.n_docs`` documents, else transform) or a ``(D, T)`` array.
    empty_topics:
        ``"drop"`` (default) or ``"error"`` for topics with no probability or no tokens.
    smooth:
        ε >= 0 added to every topic-word probability before renormalising (0: none).
    return_topics:
        Also return the indices of the model's topics that were kept.
    """
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a Corpus, got {type(corpus).__name__}")
    if empty_topics not in ("drop", "error"):
        raise ValueError(f"empty_topics must be 'drop' or 'error', got {empty_topics!r}")
    if not np.isfinite(smooth) or smooth < 0:
        raise ValueError(f"smooth must be a finite number >= 0, got {smooth!r}")
    vocab = model_vocab(model)
    if tuple(vocab) != corpus.vocab:
        raise ValueError(f"the corpus vocabulary ({corpus.n_words} words) is not the model's ({len(vocab)}); "
                         "re-index it with corpus.with_vocab(model.vocab_)")
    topics = topic_word_matrix(model)  # (T, W)
    docs = fitted_doc_topics(model, corpus, doc_topic)  # (D, T)
    if docs.shape != (corpus.n_docs, topics.shape[0]):
        raise ValueError(f"the document-topic matrix has shape {docs.shape}, expected "
                         f"({corpus.n_docs} documents, {topics.shape[0]} topics)")
    lengths = corpus.doc_lengths.astype(np.float64)
    tokens = lengths @ (docs / np.maximum(docs.sum(1, keepdims=True), 1e-300))
    empty = (topics.sum(1) <= 0) | (tokens <= 0)
    if empty.all():
        raise ValueError("every topic is empty (no probability or no tokens): nothing to show")
    if empty.any():
        msg = (f"topics {np.flatnonzero(empty).tolist()} are empty (removed, zeroed by sparsing, or used by no "
               "document)")
        if empty_topics == "error":
            raise ValueError(msg)
        warnings.warn(msg + "; they are left out of the visualisation", stacklevel=2)
    keep = np.flatnonzero(~empty)
    topics = topics[keep]
    if smooth > 0:
        topics = topics + smooth
        topics /= topics.sum(1, keepdims=True)
    docs = docs[:, keep]
    mass = docs.sum(1)
    docs_kept = np.flatnonzero(mass > 0)
    if docs_kept.size < corpus.n_docs:
        warnings.warn(f"{corpus.n_docs - docs_kept.size} documents (e.g. {int(np.flatnonzero(mass <= 0)[0])}) have "
                      "no weight on the shown topics and are left out", stacklevel=2)
    docs = docs[docs_kept] / mass[docs_kept, None]
    result = {
        "topic_term_dists": topics,
        "doc_topic_dists": docs,
        "doc_lengths": lengths[docs_kept].astype(np.int64),
        "vocab": list(vocab),
        "term_frequency": corpus.word_counts.astype(np.int64),
    }
    return (result, keep) if return_topics else result
