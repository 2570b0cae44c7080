"""What every bridge reads from a fitted model, duck-typed.

A fitted topicjax model has ``phi_`` (W x T, columns p(w|t)), ``theta_`` (T x D, columns p(t|d)
of the training documents), ``vocab_`` and ``transform(X) -> (n_docs, T)``.  Other libraries
want topics in rows: :func:`topic_word_matrix` gives the ``T x W`` matrix whose rows sum to one
(``model.get_topics()`` when the model has it, else Φᵀ with every column renormalised).  A topic
removed during fitting, or zeroed by sparsing, is an all-zero row: each bridge says what it does
with such rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["topic_word_matrix", "model_vocab", "fitted_doc_topics", "check_fitted"]


def check_fitted(model) -> None:
    """A clear error for an object that is not a fitted topic model."""
    missing = [a for a in ("phi_", "vocab_") if not hasattr(model, a)]
    if missing and not (hasattr(model, "get_topics") and hasattr(model, "vocab_")):
        raise TypeError(f"{type(model).__name__} is not a fitted topic model: it has no {', '.join(missing)} "
                        "(fit it first)")


def model_vocab(model) -> list[str]:
    """The fitted model's vocabulary (``vocab_``) as a list of strings, in the order of Φ's rows."""
    check_fitted(model)
    return [str(w) for w in model.vocab_]


def topic_word_matrix(model) -> np.ndarray:
    """``(T, W)`` float64, each row p(w|t) summing to one, or all zero for an empty topic."""
    check_fitted(model)
    if hasattr(model, "get_topics"):
        m = np.array(model.get_topics(), np.float64)
    else:
        m = np.array(model.phi_, np.float64).T
    if m.ndim != 2 or m.shape[1] != len(model.vocab_):
        raise ValueError(f"the topics have shape {m.shape}, expected (n_topics, {len(model.vocab_)} words)")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("the topics hold negative or non-finite probabilities")
    live = getattr(model, "topic_live_", None)  # a topic without tokens (LIDA: its prior alone) is empty too
    if live is not None and np.shape(live) == (m.shape[0],):
        m[~np.asarray(live, bool)] = 0.0
    s = m.sum(1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s > 0)


def fitted_doc_topics(model, corpus=None, doc_topic="auto") -> np.ndarray:
    """``(D, T)`` p(t|d) of ``corpus``'s documents.

    ``doc_topic``: ``"fitted"`` takes ``theta_`` (the training documents: ``corpus`` must be the
    training corpus); ``"transform"`` runs ``model.transform(corpus)``; ``"auto"`` takes
    ``theta_`` when it has as many documents as ``corpus`` (or ``corpus`` is None), else
    transforms; an array ``(D, T)`` is used as given.
    """
    if not isinstance(doc_topic, str):
        m = np.array(doc_topic, np.float64)
    else:
        if doc_topic not in ("auto", "fitted", "transform"):
            raise ValueError(f"doc_topic must be 'auto', 'fitted', 'transform' or an array, got {doc_topic!r}")
        theta = getattr(model, "theta_", None)
        n_docs = None if corpus is None else corpus.n_docs
        use_fitted = doc_topic == "fitted" or (
            doc_topic == "auto" and theta is not None and (n_docs is None or np.shape(theta)[1] == n_docs))
        if use_fitted:
            if theta is None:
                raise ValueError(f"{type(model).__name__} has no theta_; use doc_topic='transform'")
            m = np.array(theta, np.float64).T
            if n_docs is not None and m.shape[0] != n_docs:
                raise ValueError(f"theta_ has {m.shape[0]} documents but the corpus has {n_docs}; "
                                 "use doc_topic='transform' for other documents")
        else:
            if corpus is None:
                raise ValueError("doc_topic='transform' needs the corpus")
            m = np.array(model.transform(corpus), np.float64)
    if m.ndim != 2:
        raise ValueError(f"document-topic matrix must be 2-D (D, T), got shape {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("the document-topic matrix holds negative or non-finite values")
    return m
