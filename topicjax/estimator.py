"""Shared estimator plumbing: input conversion, save/load and topic summaries.

Every estimator of the package (``PLSA``, ``ARTM``, ``PTM``, ``TTMM``, ``LIDA``) is a
scikit-learn estimator (``get_params``/``set_params``, usable in a ``Pipeline`` after
``CountVectorizer``) that also accepts a :class:`~topicjax.data.corpus.Corpus`.  Documents are rows
on the scikit-learn side: ``transform`` returns ``(n_docs, n_components)``; fitted matrices follow
the papers' orientation (``phi_`` is W x T, ``theta_`` is T x D).

Subclasses list the fitted attributes to save in ``_saved_arrays`` (numpy arrays) and
``_saved_meta`` (JSON-able values); constructor parameters are saved from ``get_params``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from topicjax.data.corpus import Corpus
from topicjax.persistence import load_folder, save_folder

__all__ = ["TopicModelBase", "as_corpus", "int_sequence"]


def int_sequence(values, name: str, low: int) -> list[int]:
    """``values`` as a list of Python ints, each ``>= low`` (seeds, numbers of topics of a batch
    of models); a clear ``ValueError`` naming the first bad entry otherwise."""
    if isinstance(values, (str, bytes)) or np.ndim(values) != 1:
        raise ValueError(f"{name} must be a one-dimensional sequence of integers, got {values!r}")
    kind = "a non-negative" if low == 0 else ("a positive" if low == 1 else f"an >= {low}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must hold integers >= {low}: {name}[{i}] = {v!r} is not {kind} integer")
        out.append(int(v))
    return out


def as_corpus(X, vocab=None, *, what: str = "X") -> Corpus:
    """Accept a Corpus, a scipy.sparse or dense ``(n_docs, n_words)`` count matrix."""
    if isinstance(X, Corpus):
        return X
    import scipy.sparse as sp

    if sp.issparse(X):
        return Corpus.from_sparse(X, vocab=vocab)
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a Corpus or a (documents x words) matrix, got shape {arr.shape}")
    return Corpus.from_dense(arr, vocab=vocab)


class TopicModelBase(TransformerMixin, BaseEstimator):
    """Base class: conversion of inputs, checks of vocabulary, save/load."""

    _saved_arrays: tuple[str, ...] = ()
    _saved_meta: tuple[str, ...] = ()
    #: constructor parameters that cannot be stored as JSON (callables, optimisers); `load` takes them as keywords
    _unsaved_params: tuple[str, ...] = ()

    # ---------------------------------------------------------------- inputs
    def _train_corpus(self, X) -> Corpus:
        corpus = as_corpus(X)
        self.vocab_ = list(corpus.vocab)
        self.n_features_in_ = corpus.n_words
        return corpus

    def _new_corpus(self, X) -> Corpus:
        """A corpus to transform/evaluate: same vocabulary as training (clear error otherwise)."""
        self._check_fitted()
        corpus = as_corpus(X, vocab=self.vocab_ if not isinstance(X, Corpus) else None)
        if corpus.n_words != len(self.vocab_):
            raise ValueError(
                f"the corpus has {corpus.n_words} words but the model was fitted on {len(self.vocab_)}; "
                "re-index it with corpus.with_vocab(model.vocab_)"
            )
        if isinstance(X, Corpus) and tuple(self.vocab_) != corpus.vocab:
            Corpus.check_same_vocab(Corpus.from_entries([], [], [], vocab=self.vocab_, n_docs=0), corpus)
        return corpus

    def _check_fitted(self):
        if not hasattr(self, "vocab_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    # ---------------------------------------------------------------- summaries
    def top_words(self, n: int = 10, phi=None) -> list[list[str]]:
        """The ``n`` most probable words of every topic (columns of ``phi_``)."""
        self._check_fitted()
        phi = np.asarray(self.phi_ if phi is None else phi)
        order = np.argsort(-phi, axis=0, kind="stable")[:n]
        return [[self.vocab_[i] for i in order[:, t]] for t in range(phi.shape[1])]

    # ---------------------------------------------------------------- persistence
    def _save_contents(self) -> tuple[dict, dict]:
        """``(arrays, meta)`` to save: the ``_saved_arrays``, the JSON-able constructor parameters,
        the vocabulary and the ``_saved_meta``; subclasses extend both dicts."""
        self._check_fitted()
        params = {k: v for k, v in self.get_params(deep=False).items() if k not in self._unsaved_params}
        meta = {"model": type(self).__name__, "params": params, "vocab": list(self.vocab_)}
        for name in self._saved_meta:
            if hasattr(self, name):
                meta[name] = getattr(self, name)
        arrays = {name: np.asarray(getattr(self, name)) for name in self._saved_arrays if getattr(self, name, None) is not None}
        return arrays, meta

    def save(self, path) -> None:
        """Save the fitted model to folder ``path`` (``arrays.npz`` + ``meta.json``); exact round trip."""
        save_folder(path, *self._save_contents())

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save`; ``params`` supply unsaved ones (callables)."""
        arrays, meta = load_folder(path)
        if meta.get("model") != cls.__name__:
            raise ValueError(f"{path} holds a {meta.get('model')!r} model, not {cls.__name__}")
        model = cls(**{**meta["params"], **params})
        model.vocab_ = list(meta["vocab"])
        model.n_features_in_ = len(model.vocab_)
        for name in cls._saved_arrays:
            if name in arrays:
                setattr(model, name, arrays[name])
        for name in cls._saved_meta:
            if name in meta:
                setattr(model, name, meta[name])
        return model
