"""Bridge to OCTIS: its model-output dict and a model wrapper for its optimiser and metrics.

OCTIS (Terragni et al. 2021) evaluates a model through the dict its ``train_model`` returns:

* ``"topics"``: the ``top_words`` most probable words of every topic (lists of strings);
* ``"topic-word-matrix"``: ``(T, W)``, rows p(w|t) summing to one;
* ``"topic-document-matrix"``: ``(T, D_train)``, columns p(t|d);
* ``"test-topic-document-matrix"``: ``(T, D_test)`` for the test partition.

:func:`octis_output` builds it from a fitted model; :class:`OCTISModel` wraps an estimator so
that OCTIS's optimiser and metrics drive it.  It subclasses ``octis.models.model.AbstractModel``
when OCTIS can be imported, and is a plain class with the same interface otherwise (OCTIS pins
old numpy/scikit-learn/scipy and does not install beside current ones; see the README).

An all-zero topic (removed during fitting, or zeroed by sparsing) has no top words and no row
of probabilities; it is dropped from every entry of the dict (a warning names it, and
``return_topics=True`` gives the indices kept) or refused with ``empty_topics="error"``.  The
document columns are renormalised over the kept topics.
"""

from __future__ import annotations

import warnings

import numpy as np

from topicjax.data.corpus import Corpus
from topicjax.interop.common import fitted_doc_topics, model_vocab, topic_word_matrix

__all__ = ["octis_output", "OCTISModel", "corpus_from_tokens", "OCTIS_AVAILABLE"]

try:  # OCTIS's package __init__ imports all of OCTIS (torch, flask...): any failure means "absent"
    from octis.models.model import AbstractModel as _OCTISBase

    OCTIS_AVAILABLE = True
except Exception as e:  # noqa: BLE001
    OCTIS_AVAILABLE = False
    OCTIS_IMPORT_ERROR = f"{type(e).__name__}: {e}"

    class _OCTISBase:  # the part of octis.models.model.AbstractModel a model relies on
        def __init__(self):
            self.hyperparameters = dict()

        def set_hyperparameters(self, **kwargs):
            for key, value in kwargs.items():
                self.hyperparameters[key] = value


def corpus_from_tokens(documents, vocab, *, what: str = "document") -> Corpus:
    """A :class:`~topicjax.data.corpus.Corpus` of tokenised documents (OCTIS's ``get_corpus()``) over
    ``vocab``; tokens outside it are dropped, and a document left empty is an error naming it."""
    index = {str(w): i for i, w in enumerate(vocab)}
    d_ids, w_ids = [], []
    n = 0
    for d, doc in enumerate(documents):
        n = d + 1
        ids = [index[t] for t in doc if t in index]
        if not ids:
            raise ValueError(f"{what} {d} has no word of the vocabulary ({len(doc)} tokens)")
        d_ids += [d] * len(ids)
        w_ids += ids
    return Corpus.from_entries(np.asarray(d_ids, np.int64), np.asarray(w_ids, np.int64), np.ones(len(w_ids), np.int64),
                               vocab=list(vocab), n_docs=n)


def octis_output(model, *, top_words: int = 10, test: Corpus | None = None, train_doc_topic="fitted",
                 empty_topics: str = "drop", return_topics: bool = False) -> dict:
    """OCTIS's model-output dict of a fitted model.

    ``topic-document-matrix`` is ``theta_`` (``train_doc_topic="fitted"``) or any form accepted
    by :func:`~topicjax.interop.common.fitted_doc_topics`; ``test-topic-document-matrix`` is
    ``model.transform(test)`` transposed, when ``test`` is given.  ``top_words=0`` leaves out
    ``"topics"``, as OCTIS models do.  ``return_topics=True`` returns ``(dict, kept topic ids)``.
    """
    if int(top_words) != top_words or top_words < 0:
        raise ValueError(f"top_words must be a non-negative integer, got {top_words!r}")
    if empty_topics not in ("drop", "error"):
        raise ValueError(f"empty_topics must be 'drop' or 'error', got {empty_topics!r}")
    vocab = model_vocab(model)
    words = topic_word_matrix(model)
    empty = words.sum(1) <= 0
    if empty.all():
        raise ValueError("every topic of the model is all zero")
    if empty.any():
        msg = f"topics {np.flatnonzero(empty).tolist()} are all zero (removed or zeroed by sparsing)"
        if empty_topics == "error":
            raise ValueError(msg)
        warnings.warn(msg + "; they are left out of the OCTIS output", stacklevel=2)
    keep = np.flatnonzero(~empty)

    def columns(doc_topic: np.ndarray) -> np.ndarray:  # (D, T) -> (T_kept, D), columns summing to one
        m = doc_topic[:, keep].T
        s = m.sum(0, keepdims=True)
        return np.divide(m, s, out=np.zeros_like(m), where=s > 0)

    train = fitted_doc_topics(model, None, train_doc_topic)
    if train.shape[1] != words.shape[0]:
        raise ValueError(f"the document-topic matrix has {train.shape[1]} topics, the model {words.shape[0]}")
    out = {"topic-word-matrix": words[keep], "topic-document-matrix": columns(train)}
    if top_words > 0:
        order = np.argsort(-words[keep], axis=1, kind="stable")[:, :top_words]
        out["topics"] = [[vocab[i] for i in row] for row in order]
    if test is not None:
        if tuple(vocab) != tuple(test.vocab):
            raise ValueError("the test corpus has another vocabulary; re-index it with test.with_vocab(model.vocab_)")
        out["test-topic-document-matrix"] = columns(fitted_doc_topics(model, test, "transform"))
    return (out, keep) if return_topics else out


class OCTISModel(_OCTISBase):
    """A topicjax estimator as an OCTIS model.

    ``OCTISModel(ARTM(regularizers=...), num_topics=20)``: OCTIS hyperparameters are set on a
    fresh clone of the estimator at every :meth:`train_model` (``num_topics`` is its
    ``n_components``; other names are the estimator's parameters, e.g. ``max_iter``).  With
    ``use_partitions=True`` (OCTIS's default) the model is fitted on the training partition of
    the dataset and the test partition is folded in (``test-topic-document-matrix``).
    The fitted estimator of the last call is ``self.model``.
    """

    def __init__(self, estimator, *, use_partitions: bool = True, **hyperparameters):
        super().__init__()
        if not hasattr(estimator, "get_params") or not hasattr(estimator, "fit"):
            raise TypeError(f"estimator must be a topicjax (scikit-learn) estimator, got {type(estimator).__name__}")
        self.estimator = estimator
        self.use_partitions = use_partitions
        self.update_with_test = False
        self.model = None
        self.set_hyperparameters(**hyperparameters)

    def hyperparameters_info(self) -> dict:
        """The estimator's parameters (OCTIS's optimiser searches over any of them)."""
        params = self.estimator.get_params(deep=False)
        if "n_components" in params:
            params["num_topics"] = params.pop("n_components")
        return params

    def partitioning(self, use_partitions: bool, update_with_test: bool = False) -> None:
        if update_with_test:
            raise ValueError("update_with_test is not supported: the test partition is only folded in")
        self.use_partitions = use_partitions

    def _estimator(self, hyperparameters: dict):
        from sklearn.base import clone

        params = dict(self.hyperparameters)
        params.update(hyperparameters or {})
        self.hyperparameters = params
        est_params = {("n_components" if k == "num_topics" else k): v for k, v in params.items()}
        known = self.estimator.get_params(deep=False)
        unknown = sorted(k for k in est_params if k not in known)
        if unknown:
            raise ValueError(f"{type(self.estimator).__name__} has no parameter(s) {unknown}; known: "
                             f"{sorted(self.hyperparameters_info())}")
        return clone(self.estimator).set_params(**est_params)

    def train_model(self, dataset, hyperparameters=None, top_words: int = 10) -> dict:
        """Fit on ``dataset`` (an OCTIS ``Dataset``, or any object with ``get_corpus``,
        ``get_vocabulary`` and ``get_partitioned_corpus``) and return OCTIS's output dict."""
        vocab = [str(w) for w in dataset.get_vocabulary()]
        test_docs = None
        if self.use_partitions:
            parts = dataset.get_partitioned_corpus(use_validation=False)
            train_docs = parts[0]
            if len(parts) > 1:
                test_docs = parts[-1]
        else:
            train_docs = dataset.get_corpus()
        train = corpus_from_tokens(train_docs, vocab, what="training document")
        test = corpus_from_tokens(test_docs, vocab, what="test document") if test_docs else None
        self.model = self._estimator(hyperparameters).fit(train)
        return octis_output(self.model, top_words=top_words, test=test)
