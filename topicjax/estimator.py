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
* every constructor parameter has a validator (:mod:`topicjax.core.validation`), run when
  ``fit`` and ``fit_many`` start;
* ``save(path)`` / ``load(path)`` (a folder: ``arrays.npz`` + ``meta.json``, written atomically;
  ``load`` checks every field against ``_array_specs`` / ``_meta_specs`` and names the folder and
  the field of the first that is wrong: :class:`~topicjax.persistence.SavedModelError`);
* ``fit(X, checkpoint=DIR, checkpoint_every=N)``: progress saved every N iterations, a killed
  fit resumed bit for bit (:mod:`topicjax.core.checkpoint`);
* ``transform(X, empty_docs="keep" | "drop" | "error")``: documents without tokens get the topic
  distribution of no evidence (:meth:`TopicModelBase._no_evidence`), no row, or an error; a
  matrix ``X`` has no vocabulary (its columns are the model's words in ``vocab_`` order; only
  the width is checked);
* ``fit_many(X, seeds=..., n_topics=..., params=...)``: many fits in one call, each equal to its
  separate fit (a compiled batch for the EM families, sequential or threaded fits otherwise);
* numerical failures raise :class:`~topicjax.core.errors.NumericalError`.

Fitted matrices follow the papers (``phi_`` W x T, ``theta_`` T x D); the scikit-learn side uses
rows for documents (``transform`` returns ``(n_docs, n_components)``).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone

from topicjax.core.random import check_random_state, fresh_seed
from topicjax.core.validation import check_int, check_number, int_sequence, integer, number
from topicjax.data.corpus import Corpus
from topicjax.persistence import SavedModelError, check_arrays, check_meta, load_folder, save_folder

__all__ = ["TopicModelBase", "as_corpus", "int_sequence", "check_int", "check_number", "host_array"]


def host_array(x) -> np.ndarray:
    """A device array as numpy, also a replicated array that spans the devices of other processes
    (a multi-process fit: every process holds the same values)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    return np.asarray(x.addressable_shards[0].data)


def as_corpus(X, vocab=None, *, what: str = "X", empty_docs: str = "error") -> Corpus:
    """Accept a Corpus, a scipy.sparse or dense ``(n_docs, n_words)`` count matrix.

    A matrix has no vocabulary: its columns are positional, column ``j`` *is* word ``j`` of
    ``vocab`` (of the model's ``vocab_`` for a fitted model), so a matrix whose columns are in
    another order (another ``CountVectorizer``, a permutation) gives other topics without any
    error: only its width can be checked.  Give a :class:`~topicjax.data.Corpus` (which carries
    its words) or ``corpus.with_vocab(model.vocab_)`` when the order is not certain."""
    if isinstance(X, Corpus):
        return X
    import scipy.sparse as sp

    if sp.issparse(X):
        return Corpus.from_sparse(X, vocab=vocab, empty_docs=empty_docs)
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a Corpus or a (documents x words) matrix, got shape {arr.shape}")
    return Corpus.from_dense(arr, vocab=vocab, empty_docs=empty_docs)


#: the contract's parameters: name -> validator(value, name)
_COMMON = {
    "n_components": integer(1),
    "max_iter": integer(1),
    "tol": number(0.0),
    "random_state": check_random_state,
}


class TopicModelBase(TransformerMixin, BaseEstimator):
    """Base class: the contract above, conversion of inputs, checks of vocabulary, save/load."""

    _saved_arrays: tuple[str, ...] = ()
    _saved_meta: tuple[str, ...] = ()
    #: constructor parameters that cannot be stored as JSON (callables, optimisers); `load` takes them
    _unsaved_params: tuple[str, ...] = ()
    #: validators of a family's own constructor parameters: name -> validator(value, name)
    #: (:mod:`topicjax.core.validation`); with the common ones, every parameter has one
    _constraints: dict = {}
    #: what ``load`` accepts: saved arrays (name -> :class:`~topicjax.persistence.ArraySpec`) and
    #: metadata fields (name -> kind of :func:`~topicjax.persistence.check_meta`), those required
    _array_specs: dict = {}
    _meta_specs: dict = {}
    _meta_required: tuple[str, ...] = ()

    # ---------------------------------------------------------------- parameters
    def _validate_params(self) -> None:
        """Check every constructor parameter with its validator (the common ones of this module and
        the family's ``_constraints``): ``ValueError("<name> must be ..., got <value>")``."""
        params = self.get_params(deep=False)
        for name, check in {**_COMMON, **self._constraints}.items():
            if name in params:
                check(params[name], name)

    def _seed(self, checkpoint=None):
        """The seed of this fit: ``random_state``, or for ``None`` a fresh one (kept in
        ``seed_`` so that the fit can be repeated; a resumed fit takes its checkpoint's)."""
        rs = check_random_state(self.random_state)
        if rs is None:
            rs = fresh_seed()
        if checkpoint is not None:
            rs = checkpoint.start(rs)
        self.seed_ = rs
        return rs

    def _checkpoint_params(self) -> dict:
        """The parameters that identify a fit in a checkpoint (``progress`` does not count;
        families describe their callables here)."""
        params = self.get_params(deep=False)
        params.pop("progress", None)
        return params

    def _open_checkpoint(self, checkpoint, checkpoint_every, corpus, **extra):
        """The :class:`~topicjax.core.checkpoint.Checkpoint` of this fit (``None`` without one)."""
        from topicjax.core import checkpoint as ck

        if checkpoint is None:
            ck.open_checkpoint(None, checkpoint_every, {})
            return None
        identity = {"model": type(self).__name__, "params": ck.describe(self._checkpoint_params()),
                    "corpus": ck.fingerprint(corpus), **ck.describe(extra)}
        return ck.open_checkpoint(checkpoint, checkpoint_every, identity)

    # ---------------------------------------------------------------- inputs
    def _train_corpus(self, X) -> Corpus:
        corpus = as_corpus(X)
        self.vocab_ = list(corpus.vocab)
        self.n_features_in_ = corpus.n_words
        return corpus

    def _new_corpus(self, X) -> Corpus:
        """A corpus to transform/evaluate: same vocabulary as training, every document with
        tokens (clear errors otherwise)."""
        return self._new_docs(X, "error")[0]

    def _new_docs(self, X, empty_docs: str = "error"):
        """``(corpus, rows, n_rows)``: the documents of ``X`` that have tokens as a corpus over the
        model's vocabulary, their rows in ``X`` (``None`` when every document has tokens) and the
        number of rows of ``X``.  Documents without tokens are an error (``empty_docs="error"``)
        or set aside (``"keep"``, ``"drop"``: see :meth:`_place_rows`)."""
        from topicjax.core.validation import one_of
        from topicjax.data.corpus import CorpusError

        self._check_fitted()
        one_of("keep", "drop", "error")(empty_docs, "empty_docs")
        W = len(self.vocab_)
        mismatch = ("re-index it with corpus.with_vocab(model.vocab_) (a matrix has no vocabulary: its columns must be "
                    "the model's words, in the same order)")
        if isinstance(X, Corpus):
            corpus = X
            if corpus.n_words != W:
                raise ValueError(f"the corpus has {corpus.n_words} words but the model was fitted on {W}; {mismatch}")
            if tuple(self.vocab_) != corpus.vocab:
                Corpus.check_same_vocab(Corpus.from_entries([], [], [], vocab=self.vocab_, n_docs=0), corpus)
            n_rows = corpus.n_docs
            empty = np.flatnonzero(corpus.doc_lengths == 0)
        else:
            shape = X.shape if hasattr(X, "shape") else np.shape(X)
            if len(shape) == 2 and shape[1] != W:
                raise ValueError(f"X has {shape[1]} columns but the model was fitted on {W} words; {mismatch}")
            corpus = as_corpus(X, vocab=self.vocab_, empty_docs="drop")
            n_rows = corpus.n_docs + int(corpus.dropped_docs.size)
            empty = corpus.dropped_docs
        if not empty.size:
            return corpus, None, n_rows
        if empty_docs == "error":
            raise CorpusError(
                f"document {int(empty[0])} of X has no tokens ({empty.size} such document(s)): nothing to infer its "
                "topics from; transform(X, empty_docs='keep') gives such documents the topic distribution of no "
                "evidence, empty_docs='drop' leaves them out")
        rows = np.setdiff1d(np.arange(n_rows), empty)
        if isinstance(X, Corpus):
            corpus = corpus.subset(rows)
        return corpus, rows, n_rows

    def _no_evidence(self) -> np.ndarray:
        """The topic distribution of a document without tokens, ``(n_components,)``: uniform over
        the topics in the model (the families' inference starts there and no token moves it);
        TTMM overrides it with its prior."""
        alive = np.asarray(getattr(self, "topic_alive_", np.ones(int(self.n_components))), np.float64) > 0
        return alive / alive.sum()

    def _place_rows(self, values: np.ndarray, rows, n_rows: int, empty_docs: str) -> np.ndarray:
        """``values`` (one row per document with tokens) as the result for all ``n_rows`` rows of
        ``X``: documents without tokens get :meth:`_no_evidence` (``"keep"``) or no row (``"drop"``)."""
        if rows is None or empty_docs == "drop":
            return values
        out = np.empty((n_rows, values.shape[1]), values.dtype)
        out[:] = self._no_evidence().astype(values.dtype)
        out[rows] = values
        return out

    def _transform_docs(self, X, empty_docs: str, infer) -> np.ndarray:
        """``transform`` for every family: ``infer(corpus) -> (n_docs, n_components)`` on the
        documents with tokens, the others handled by ``empty_docs`` (see :meth:`_place_rows`)."""
        corpus, rows, n_rows = self._new_docs(X, empty_docs)
        if corpus.n_docs:
            values = np.asarray(infer(corpus))
        else:
            values = np.zeros((0, len(self._no_evidence())), np.float32)
        return self._place_rows(values, rows, n_rows, empty_docs)

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

    def _saved_sizes(self) -> dict:
        """Sizes that the saved arrays' shapes must match (symbols of ``_array_specs``)."""
        return {"W": len(self.vocab_), "T": int(self.n_components)}

    @classmethod
    def _check_class(cls, path, meta) -> None:
        model_name = meta.get("model")
        if model_name != cls.__name__:
            hint = (f"; load it with {model_name}.load or topicjax.persistence.load" if isinstance(model_name, str)
                    else "")
            raise SavedModelError(f"{path} holds a {model_name!r} model, not {cls.__name__}{hint}")

    @classmethod
    def _from_saved(cls, path, arrays, meta, params):
        """A model from the contents of a saved folder, every field checked first: the class, the
        parameters (known, valid), the vocabulary, the arrays (present, dtype, shape, finite) and the
        metadata; a :class:`~topicjax.persistence.SavedModelError` naming the folder and the field."""
        cls._check_class(path, meta)
        accepted = set(cls._get_param_names())
        saved = meta.get("params")
        if not isinstance(saved, dict):
            raise SavedModelError(f"{path}: meta.json has no 'params' object")
        unknown = sorted(set(saved) - accepted)
        if unknown:
            raise SavedModelError(f"{path}: meta.json field 'params' has unknown parameter(s) {unknown} for "
                                  f"{cls.__name__}")
        vocab = meta.get("vocab")
        if not isinstance(vocab, list) or not vocab or not all(isinstance(v, str) for v in vocab):
            what = "missing" if vocab is None else f"a {type(vocab).__name__}"
            raise SavedModelError(f"{path}: meta.json field 'vocab' must be a non-empty list of words, it is {what}"
                                  + (" of non-strings" if isinstance(vocab, list) and vocab else ""))
        model = cls(**{**saved, **params})
        try:
            model._validate_params()
        except ValueError as e:
            raise SavedModelError(f"{path}: meta.json field 'params': {e}") from None
        model.vocab_ = list(vocab)
        model.n_features_in_ = len(model.vocab_)
        check_meta(path, meta, cls._meta_specs)
        missing = [name for name in cls._meta_required if name not in meta]
        if missing:
            raise SavedModelError(f"{path}: meta.json has no field {missing[0]!r}")
        model._load_sizes = check_arrays(path, arrays, cls._array_specs, model._saved_sizes())
        for name in cls._saved_arrays:
            if name in arrays:
                setattr(model, name, arrays[name])
        for name in cls._saved_meta:
            if name in meta:
                setattr(model, name, meta[name])
        if "n_iter_" in meta and isinstance(meta.get("history_"), list) and len(meta["history_"]) != meta["n_iter_"]:
            raise SavedModelError(f"{path}: meta.json field 'history_' has {len(meta['history_'])} records but "
                                  f"n_iter_ is {meta['n_iter_']}")
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
