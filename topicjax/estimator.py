"""The estimator contract shared by every model of the package (PLSA, ARTM, PTM, TTMM, LIDA).

Every estimator is a scikit-learn estimator (``get_params``/``set_params``, usable in a
``Pipeline`` after ``CountVectorizer``) that also accepts a :class:`~topicjax.data.Corpus`, and
keeps one contract, checked for all five families by ``tests/test_estimator_contract.py``:

* parameters ``n_components`` (an int >= 1), ``random_state`` (an int in [0, 2**32), ``None`` for
  fresh entropy, or a ``jax.random`` key), ``max_iter`` (an int >= 1) and ``tol`` (a finite number
  >= 0) are validated by :meth:`TopicModelBase._validate_params` with the same messages
  everywhere (families add their own constraints in ``_constraints``);
* fitted ``phi_`` (W x T, the papers' orientation), ``theta_`` (T x D, likewise),
  ``components_`` (T x W: rows are the topics' word distributions, scikit-learn's orientation,
  rows summing to 1 except topics removed from the model, which are zero), ``transform(X)`` and
  ``fit_transform`` (documents x topics), ``history_`` (one dict per iteration with at least
  ``iteration``, ``objective`` and ``seconds``), ``n_iter_``, ``vocab_``;
* ``save(path)`` / ``load(path)`` (a folder: ``arrays.npz`` + ``meta.json``, written atomically);
* ``fit_many(X, seeds=..., n_topics=..., params=...)``: many fits in one call, each equal to its
  separate fit (a compiled batch for the EM families, sequential or threaded fits otherwise);
* numerical failures raise :class:`~topicjax.core.errors.NumericalError`.

Fitted matrices follow the papers (``phi_`` W x T, ``theta_`` T x D); the scikit-learn side uses
rows for documents (``transform`` returns ``(n_docs, n_components)``).
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone

from topicjax.core.random import check_random_state, fresh_seed
from topicjax.data.corpus import Corpus
from topicjax.persistence import load_folder, save_folder

__all__ = ["TopicModelBase", "as_corpus", "int_sequence", "check_int", "check_number", "host_array"]


# ----------------------------------------------------------------------------- validation
def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``; a ``ValueError`` in one shape otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        rng = f">= {low}" if high is None else (f"in [{low}, {high}]" if low is not None else f"<= {high}")
        raise ValueError(f"{name} must be an integer {rng}, got {value!r}")
    return int(value)


def check_number(value, name: str, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False) -> float:
    """``value`` as a finite float in the range; a ``ValueError`` in one shape otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if (low is not None and (v < low or (low_open and v == low))) or (high is not None and v > high):
        lo = "" if low is None else (f"> {low}" if low_open else f">= {low}")
        hi = "" if high is None else f"<= {high}"
        raise ValueError(f"{name} must be a number {' and '.join(x for x in (lo, hi) if x)}, got {value!r}")
    return v


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


def host_array(x) -> np.ndarray:
    """A device array as numpy, also a replicated array that spans the devices of other processes
    (a multi-process fit: every process holds the same values)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    return np.asarray(x.addressable_shards[0].data)


def as_corpus(X, vocab=None, *, what: str = "X") -> Corpus:
    """Accept a Corpus, a scipy.sparse or dense ``(n_docs, n_words)`` count matrix (columns are
    positional: a matrix has no vocabulary)."""
    if isinstance(X, Corpus):
        return X
    import scipy.sparse as sp

    if sp.issparse(X):
        return Corpus.from_sparse(X, vocab=vocab)
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a Corpus or a (documents x words) matrix, got shape {arr.shape}")
    return Corpus.from_dense(arr, vocab=vocab)


#: the contract's parameters: name -> validator(value, name)
_COMMON = {
    "n_components": lambda v, n: check_int(v, n, 1),
    "max_iter": lambda v, n: check_int(v, n, 1),
    "tol": lambda v, n: check_number(v, n, 0.0),
    "random_state": check_random_state,
}


class TopicModelBase(TransformerMixin, BaseEstimator):
    """Base class: the contract above, conversion of inputs, checks of vocabulary, save/load."""

    _saved_arrays: tuple[str, ...] = ()
    _saved_meta: tuple[str, ...] = ()
    #: constructor parameters that cannot be stored as JSON (callables, optimisers); `load` takes them
    _unsaved_params: tuple[str, ...] = ()
    #: extra validators of a family: parameter name -> validator(value, name)
    _constraints: dict = {}

    # ---------------------------------------------------------------- parameters
    def _validate_params(self) -> None:
        """Check every constrained parameter (one message shape for all estimators)."""
        params = self.get_params(deep=False)
        for name, check in {**_COMMON, **self._constraints}.items():
            if name in params:
                check(params[name], name)

    def _seed(self):
        """The seed of this fit: ``random_state``, or for ``None`` a fresh one (kept in
        ``seed_`` so that the fit can be repeated)."""
        rs = check_random_state(self.random_state)
        if rs is None:
            rs = fresh_seed()
        self.seed_ = rs
        return rs

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
                "re-index it with corpus.with_vocab(model.vocab_) (a matrix's columns must be the model's words, "
                "in the same order)"
            )
        if isinstance(X, Corpus) and tuple(self.vocab_) != corpus.vocab:
            Corpus.check_same_vocab(Corpus.from_entries([], [], [], vocab=self.vocab_, n_docs=0), corpus)
        return corpus

    def _check_fitted(self):
        if not hasattr(self, "vocab_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    # ---------------------------------------------------------------- fitted views
    def _set_components(self):
        """``components_`` (T x W) from ``phi_``."""
        self.components_ = np.ascontiguousarray(np.asarray(self.phi_).T)

    def get_topics(self) -> np.ndarray:
        """The topics' word distributions, ``(n_components, n_words)`` (gensim's ``get_topics``)."""
        self._check_fitted()
        return np.asarray(self.components_)

    def top_words(self, n: int = 10, phi=None) -> list[list[str]]:
        """The ``n`` most probable words of every topic (columns of ``phi_``)."""
        self._check_fitted()
        phi = np.asarray(self.phi_ if phi is None else phi)
        order = np.argsort(-phi, axis=0, kind="stable")[:n]
        return [[self.vocab_[i] for i in order[:, t]] for t in range(phi.shape[1])]

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X)`` then the training documents' topic proportions, ``(n_docs, n_components)``."""
        self.fit(X, y, **fit_params) if y is not None else self.fit(X, **fit_params)
        return np.asarray(self.theta_).T

    # ---------------------------------------------------------------- many fits
    def _clone_with(self, **params):
        return clone(self).set_params(**params)

    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, workers=None) -> list:
        """Fit many models: clones of this estimator with ``random_state=seeds[g]``,
        ``n_components=n_topics[g]`` and the parameters ``params = {name: [value per model]}``,
        each equal to its separate :meth:`fit`.  This generic version runs the fits on the host,
        ``mode="sequential"`` (default) or ``"threads"`` (``workers`` threads; JAX releases the
        GIL while it computes); the EM families override it with one compiled batch."""
        from topicjax.core.driver import MODES

        settings = {}
        if seeds is not None:
            settings["random_state"] = int_sequence(seeds, "seeds", 0)
        if n_topics is not None:
            settings["n_components"] = int_sequence(n_topics, "n_topics", 1)
        for name, values in (params or {}).items():
            if name not in self.get_params(deep=False):
                raise ValueError(f"fit_many: {type(self).__name__} has no parameter {name!r}")
            settings[name] = list(values)
        if not settings:
            raise ValueError("fit_many needs at least one of seeds, n_topics or params")
        sizes = {k: len(v) for k, v in settings.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"seeds, n_topics and params must have one length (models), got {sizes}")
        G = next(iter(sizes.values()))
        if G == 0:
            raise ValueError("fit_many: no models")
        mode = mode or "sequential"
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        models = [self._clone_with(**{k: v[g] for k, v in settings.items()}) for g in range(G)]
        for m in models:
            m._validate_params()
        fit = (lambda m: m.fit(X, y)) if y is not None else (lambda m: m.fit(X))
        if mode == "threads":
            import os
            from concurrent.futures import ThreadPoolExecutor

            n = max(1, min(int(workers or len(os.sched_getaffinity(0))), G))
            with ThreadPoolExecutor(n) as pool:
                return list(pool.map(fit, models))
        return [fit(m) for m in models]

    # ---------------------------------------------------------------- persistence
    def _save_contents(self) -> tuple[dict, dict]:
        """``(arrays, meta)`` to save: the ``_saved_arrays``, the JSON-able constructor parameters,
        the vocabulary and the ``_saved_meta``; subclasses extend both dicts."""
        self._check_fitted()
        params = {k: v for k, v in self.get_params(deep=False).items() if k not in self._unsaved_params}
        if "random_state" in params and not (params["random_state"] is None or isinstance(params["random_state"], int)):
            params["random_state"] = getattr(self, "seed_", None) if isinstance(getattr(self, "seed_", None), int) else None
        meta = {"model": type(self).__name__, "params": params, "vocab": list(self.vocab_)}
        for name in self._saved_meta:
            if hasattr(self, name):
                meta[name] = getattr(self, name)
        arrays = {name: np.asarray(getattr(self, name)) for name in self._saved_arrays if getattr(self, name, None) is not None}
        return arrays, meta

    @staticmethod
    def _write(path, arrays, meta) -> None:
        save_folder(path, arrays, meta)

    @staticmethod
    def _read(path):
        return load_folder(path)

    def save(self, path) -> None:
        """Save the fitted model to folder ``path`` (``arrays.npz`` + ``meta.json``); exact round trip."""
        self._write(path, *self._save_contents())

    @classmethod
    def _from_saved(cls, path, arrays, meta, params):
        if meta.get("model") != cls.__name__:
            raise ValueError(f"{path} holds a {meta.get('model')!r} model, not {cls.__name__}")
        accepted = set(cls._get_param_names())
        saved = meta.get("params")
        if not isinstance(saved, dict):
            raise ValueError(f"{path}: meta.json has no 'params' mapping")
        unknown = sorted(set(saved) - accepted)
        if unknown:
            raise ValueError(f"{path}: unknown parameter(s) {unknown} for {cls.__name__}")
        if not isinstance(meta.get("vocab"), list):
            raise ValueError(f"{path}: meta.json has no 'vocab' list")
        model = cls(**{**saved, **params})
        model.vocab_ = [str(v) for v in meta["vocab"]]
        model.n_features_in_ = len(model.vocab_)
        for name in cls._saved_arrays:
            if name in arrays:
                setattr(model, name, arrays[name])
        for name in cls._saved_meta:
            if name in meta:
                setattr(model, name, meta[name])
        return model

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save`; ``params`` supply unsaved ones (callables)."""
        arrays, meta = cls._read(path)
        model = cls._from_saved(path, arrays, meta, params)
        if hasattr(model, "phi_") and "components_" not in vars(model):
            try:
                model._set_components()
            except (AttributeError, TypeError):
                pass
        return model
