"""The estimator contract shared by every model of the package (PLSA, ARTM, PTM, TTMM, LIDA).

:class:`TopicModelBase` is the base class of every estimator: a scikit-learn estimator
(``get_params``/``set_params``, ``Pipeline``, ``GridSearchCV``) that also accepts a
:class:`~topicjax.data.Corpus`, a count matrix (dense, scipy.sparse) or a pandas DataFrame, with
one contract for all five families (``tests/test_estimator_contract.py``, ``tests/test_sklearn.py``):

* constructor ``Estimator(n_components, *, ...)``: every parameter but the number of topics
  keyword-only, every one validated when ``fit`` / ``fit_many`` start
  (:meth:`TopicModelBase._validate_params`; ``n_components`` an int >= 1, ``random_state`` an int
  in [0, 2**32), ``None`` or a ``jax.random`` key, ``max_iter`` an int >= 1, ``tol`` a finite
  number >= 0), a bad value an error naming the parameter;
* fitted ``phi_`` (W x T) and ``theta_`` (T x D) in the papers' orientation, ``components_``
  (T x W), ``history_``, ``n_iter_``, ``vocab_``; ``transform`` / ``fit_transform`` return
  ``(n_docs, n_components)`` rows that are distributions (``empty_docs="keep" | "drop" |
  "error"``; documents without evidence get the no-evidence distribution and a
  :class:`NoEvidenceWarning`);
* ``score(X)`` (held-out log-likelihood per token by document completion), ``perplexity(X)``,
  ``get_feature_names_out()``, ``partial_fit`` where online learning exists;
* ``save(path)`` / ``load(path)`` (a folder, written atomically; a bad field is a
  :class:`~topicjax.persistence.SavedModelError` naming it), ``fit(X, checkpoint=DIR)`` resumable
  bit for bit;
* ``fit_many(X, y=None, *, seeds, n_topics, params, mode, vmap_size, workers)``: many fits, each
  equal to its separate fit (:class:`FitManyFallbackWarning` where no compiled batch exists);
* numerical failures raise :class:`~topicjax.core.errors.NumericalError`.

The rest of the module is the input checks that the families share (:func:`as_corpus`,
:func:`check_int`, :func:`check_number`, :func:`refuse_documents`, ...) and the warnings above
(:class:`EmptyTopicsWarning`, :class:`CustomRegularizerWarning`).

The contract in full (each parameter's rule, ``transform``'s empty documents, the scikit-learn
inputs and conformance): ``docs/guides/internals.md``, "The estimator contract in full".

>>> import topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
>>> model = tj.PLSA(5, max_iter=3, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape, model.transform(corpus).shape
((25, 5), (5, 40), (40, 5))
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import jax
import numpy as np

from topicjax._sklearn_api import EstimatorAPI, clone, not_fitted
from topicjax.core import checkpoint as ck, driver, numerics
from topicjax.core.driver import MODES
from topicjax.core.errors import NumericalError
from topicjax.core.random import check_random_state, fresh_seed
from topicjax.core.sharding import host_array
from topicjax.core.validation import check_int, check_number, int_sequence, integer, number, one_of
from topicjax.data import entries
from topicjax.data.corpus import Corpus, CorpusError
from topicjax.evaluation import metrics
from topicjax.persistence import SavedModelError, check_arrays, check_meta, load_folder, register_model, save_folder

__all__ = ["TopicModelBase", "FitManyFallbackWarning", "NoEvidenceWarning", "EmptyTopicsWarning",
           "CustomRegularizerWarning", "as_corpus",
           "int_sequence", "check_int", "check_number", "host_array", "SCORE_SEED", "completion_corpus",
           "is_placeholder_vocab", "refuse_documents"]

#: seed of the split of :meth:`TopicModelBase.score`: fixed, so that every model (every candidate
#: of a grid search, whatever its ``random_state``) is scored on the same halves of the documents
SCORE_SEED = 0


def as_corpus(X, vocab=None, *, what: str = "X", empty_docs: str = "error") -> Corpus:
    """Accept a Corpus, a scipy.sparse or dense ``(n_docs, n_words)`` count matrix.

    A matrix has no vocabulary: its columns are positional, column ``j`` *is* word ``j`` of
    ``vocab`` (of the model's ``vocab_`` for a fitted model), so a matrix whose columns are in
    another order (another ``CountVectorizer``, a permutation) gives other topics without any
    error: only its width can be checked.  Give a :class:`~topicjax.data.Corpus` (which carries
    its words) or ``corpus.with_vocab(model.vocab_)`` when the order is not certain."""
    if isinstance(X, Corpus):
        return X
    refuse_documents(X, what=what)
    if entries.is_sparse_matrix(X):
        return Corpus.from_sparse(X, vocab=vocab, empty_docs=empty_docs)
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a Corpus or a (documents x words) matrix, got shape {arr.shape}")
    return Corpus.from_dense(arr, vocab=vocab, empty_docs=empty_docs)


def _some(items, n: int = 3) -> str:
    """``'a', 'b', 'c' and 4 more``, for messages."""
    more = f" and {len(items) - n} more" if len(items) > n else ""
    return ", ".join(repr(x) for x in items[:n]) + more


def refuse_documents(X, where: str | None = None, what: str = "X") -> None:
    """A clear ``TypeError`` when ``X`` holds documents as text (a string, a list of strings or of
    token lists) or as gensim bags of words (lists of ``(word_id, count)``) instead of a count
    matrix: scikit-learn would say "could not convert string to float" or "Expected 2D array".
    ``where`` (the method, e.g. ``"PLSA.fit"``) starts the message."""
    head = f"{where}: {what}" if where else what
    if isinstance(X, (str, bytes)):
        raise TypeError(f"{head} is a single string; give a Corpus, e.g. tj.Corpus.from_texts([text, ...]), or put a "
                        "CountVectorizer before the model in a Pipeline")
    if not (isinstance(X, (list, tuple)) or getattr(X, "ndim", None) == 1) or len(X) == 0:
        return
    first = next(iter(X))
    if isinstance(first, (str, bytes)):
        raise TypeError(f"{head} is a list of {len(X)} texts, not a count matrix; give a Corpus "
                        "(tj.Corpus.from_texts(texts, stop_words='english')) or put a CountVectorizer before the "
                        "model in a Pipeline")
    if isinstance(first, (list, tuple)) and first and all(isinstance(t, (str, bytes)) for t in first):
        raise TypeError(f"{head} is a list of {len(X)} tokenised documents (lists of words), not a count matrix; "
                        "give a Corpus (tj.Corpus.from_texts([' '.join(doc) for doc in X])) or put a "
                        "CountVectorizer(analyzer=lambda doc: doc) before the model in a Pipeline")
    if isinstance(first, (list, tuple)) and first and all(isinstance(t, tuple) and len(t) == 2 for t in first):
        raise TypeError(f"{head} is a list of {len(X)} bags of words ((word_id, count) pairs, as gensim writes "
                        "them), not a count matrix; give a Corpus: tj.Corpus.from_lists(X, vocab=...)")


def is_placeholder_vocab(vocab) -> bool:
    """Whether ``vocab`` is the placeholder vocabulary ``w0, w1, ...`` of a matrix without names."""
    return len(vocab) > 0 and all(v == f"w{i}" for i, v in enumerate(vocab))


def completion_corpus(corpus: Corpus, phi) -> Corpus:
    """The documents of ``corpus`` that document completion can score under a model with word
    distributions ``phi`` (W x T): without the tokens of words every topic gives probability
    zero, and without the documents then left with fewer than 2 tokens.  A ``ValueError`` when
    no document is left."""
    phi = np.asarray(phi)
    known = phi.sum(1) > 0
    counts = np.where(known[corpus.word_ids], corpus.counts, 0)
    if counts.sum() == 0:
        raise ValueError("document completion: no token of X is of a word the model knows")
    kept = Corpus.from_entries(corpus.doc_ids, corpus.word_ids, counts, vocab=corpus.vocab, n_docs=corpus.n_docs,
                               modalities=corpus.modalities, modality_names=corpus.modality_names,
                               empty_docs="drop")
    long = np.flatnonzero(kept.doc_lengths >= 2)
    if long.size == 0:
        raise ValueError("document completion needs documents of at least 2 tokens (of words the model knows); "
                         f"X has none among its {corpus.n_docs} document(s)")
    return kept if long.size == kept.n_docs else kept.subset(long)


def _rows_text(rows) -> str:
    """``document 3`` / ``documents 0, 4, 7 and 12 more``, for messages naming rows of ``X``."""
    rows = [int(r) for r in rows]
    head = ", ".join(str(r) for r in rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
    return f"document {head}" if len(rows) == 1 else f"documents {head}"


class NoEvidenceWarning(UserWarning):
    """``transform`` met documents it cannot infer topics from -- every token of a word the model
    does not know (one without probability in any topic: absent from the training documents), or,
    in ARTM, Θ-regularizers that leave a document no topic -- and says which (their rows in ``X``)
    and what they were given instead (the topic distribution of no evidence, or Θ without the
    Θ-regularizers)."""


class CustomRegularizerWarning(UserWarning):
    """A model saved with a custom regularizer (a plain function, no JSON spec): it is saved by
    name only, so only ``Model.load(path, regularizers=...)`` reloads it, not
    :func:`topicjax.persistence.load` or the command line."""


class EmptyTopicsWarning(UserWarning):
    """A fit ended with topics that hold no mass (ARTM Notes 1-2: a regularizer drove their φ
    column or their θ row to zero); the warning names them and the regularizers present, and
    ``empty_topics_`` lists them."""


class FitManyFallbackWarning(UserWarning):
    """``fit_many`` was asked for a compiled batch (``mode="vmap"`` or ``"devices"``) that these
    fits cannot form, and runs them one after the other on the host instead (as numpyro warns
    when its chains fall back to sequential sampling)."""


#: the contract's parameters: name -> validator(value, name)
_COMMON = {
    "n_components": integer(1),
    "max_iter": integer(1),
    "tol": number(0.0),
    "random_state": check_random_state,
}


#: Estimator methods that compile and run a model: traced with float32 matrix products at full
#: float32 precision (:func:`topicjax.core.numerics.full_precision`; XLA's GPU default is TF32).
FULL_PRECISION_METHODS = ("fit", "fit_many", "partial_fit", "transform", "fit_transform", "score", "perplexity",
                          "completion_score")


class TopicModelBase(EstimatorAPI):
    """Base class: the contract above, conversion of inputs, checks of vocabulary, save/load.

    scikit-learn's estimator API (``get_params``, ``set_params``, ``repr``, ``set_output``, tags)
    comes from :class:`topicjax._sklearn_api.EstimatorAPI`, not from ``sklearn.base``, whose
    import (SciPy's statistics, pandas: about 1.2 s of CPU) no fit on a Corpus needs:
    scikit-learn is loaded by the scikit-learn tools a program uses, by a matrix input's
    validation (:meth:`_as_corpus`) and by the ``NotFittedError`` of an unfitted model."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register_model(cls)  # topicjax.persistence.load reopens it by name
        for name in FULL_PRECISION_METHODS:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_full_precision", False):
                wrapped = numerics.full_precision(fn)
                wrapped._full_precision = True
                setattr(cls, name, wrapped)

    #: a keyword-only parameter that an older version took as the first positional argument, before
    #: ``n_components`` (TTMM's ``n_themes``, LIDA's ``variant``): named by the error of such a call
    _formerly_first: str | None = None

    def __new__(cls, *args, **kwargs):
        # scikit-learn reads the parameters from ``__init__``'s signature and refuses ``*args``
        # there, so the positional arguments of an older calling convention are caught here,
        # where Python would otherwise say only "takes 2 positional arguments but 3 were given"
        # (or, for LIDA("ftm"), take the variant for the number of topics)
        old = cls._formerly_first
        if len(args) > 1 or (old is not None and args and isinstance(args[0], str)):
            name = cls.__name__
            if old is not None and (len(args) == 2 or isinstance(args[0], str)):
                given = ", ".join(map(repr, args))
                fix = (f"{name}({args[1]!r}, {old}={args[0]!r})" if len(args) == 2 else f"{name}({old}={args[0]!r})")
                raise TypeError(f"{name}({given}): n_components (the number of topics) is the only positional "
                                f"argument and {old} is keyword-only; write {fix}")
            raise TypeError(f"{name} takes one positional argument, n_components (the number of topics), and "
                            f"{len(args)} were given; pass the others by keyword, e.g. {name}({args[0]!r}, "
                            "max_iter=50)")
        return super().__new__(cls)

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
        """The one validation hook, run when ``fit``, ``fit_many``, ``partial_fit`` and ``load``
        start: every constructor parameter through its validator (the common ones of this module
        and the family's ``_constraints``): ``ValueError("<name> must be ..., got <value>")``.
        Families with constraints between parameters override it, calling ``super()`` first."""
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
        if checkpoint is None:
            ck.open_checkpoint(None, checkpoint_every, {})
            return None
        identity = {"model": type(self).__name__, "params": ck.describe(self._checkpoint_params()),
                    "corpus": ck.fingerprint(corpus), **ck.describe(extra)}
        return ck.open_checkpoint(checkpoint, checkpoint_every, identity)

    # ---------------------------------------------------------------- inputs
    def __sklearn_tags__(self):  # read only by scikit-learn's tools, which have imported it
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True  # counts
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = []  # topic proportions are float32 or float64, whatever X is
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "vocab_") and hasattr(self, "phi_")

    def _as_corpus(self, X, *, reset: bool, method: str, empty_docs: str = "error") -> Corpus:
        """``X`` as a Corpus.  A matrix is validated as scikit-learn validates inputs
        (``validate_data``: NaN/inf/complex/empty/1-d, the number of columns after fitting, and
        the column names of a DataFrame, kept in ``feature_names_in_``), then checked
        non-negative; a DataFrame's column names are its vocabulary."""
        if isinstance(X, Corpus):
            if reset:
                self.n_features_in_ = X.n_words
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
            return X
        from sklearn.utils.validation import check_non_negative, validate_data

        refuse_documents(X, f"{type(self).__name__}.{method}")
        if not reset:
            X = self._frame_in_vocab_order(X)
        shape = getattr(X, "shape", None)
        if not reset and shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                f"features as input: a matrix's columns must be the model's words, in the order of vocab_ (re-index "
                "a Corpus with corpus.with_vocab(model.vocab_))")
        M = validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"), dtype="numeric")
        check_non_negative(M, f"{type(self).__name__}.{method}")
        names = getattr(self, "feature_names_in_", None)
        vocab = [str(v) for v in names] if reset and names is not None else (None if reset else self.vocab_)
        return as_corpus(M, vocab=vocab, empty_docs=empty_docs)

    def _frame_in_vocab_order(self, X):
        """A DataFrame whose columns are words (strings), with its columns in the order of
        ``vocab_``: columns are matched by name, never by position; a word of the model without a
        column, a column that is not a word of the model or a column twice is an error naming
        them.  Anything else (a matrix, a DataFrame with positional columns, a model fitted on a
        matrix, whose words are placeholders) is returned as it is."""
        columns = getattr(X, "columns", None)
        if columns is None or not hasattr(X, "loc") or not all(isinstance(c, str) for c in columns):
            return X
        vocab = list(self.vocab_)
        if is_placeholder_vocab(vocab):
            return X
        have, known = set(columns), set(vocab)
        missing = [w for w in vocab if w not in have]
        extra = [c for c in columns if c not in known]
        twice = sorted({c for c in columns if list(columns).count(c) > 1}) if len(have) < len(columns) else []
        if missing or extra or twice:
            parts = [f"{len(ws)} {what} ({_some(ws)})" for ws, what in
                     ((missing, "of the model's words have no column"), (extra, "columns are not words of the model"),
                      (twice, "columns appear twice")) if ws]
            raise ValueError(f"the columns of X (its feature names) are matched to the model's words by name: "
                             f"{'; '.join(parts)}; give one column per word of vocab_ (X.reindex(columns=model.vocab_, "
                             "fill_value=0)), or a Corpus re-indexed with corpus.with_vocab(model.vocab_)")
        aligned = X if list(columns) == vocab else X.loc[:, vocab]
        if hasattr(self, "feature_names_in_"):  # fitted on a DataFrame: scikit-learn checks the names again
            return aligned
        try:  # fitted on a Corpus: the names are used here, so scikit-learn need not warn that it ignores them
            return aligned.sparse.to_coo()
        except AttributeError:  # not every column sparse
            return aligned.to_numpy()

    def _train_corpus(self, X) -> Corpus:
        corpus = self._as_corpus(X, reset=True, method="fit")
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
            corpus = self._as_corpus(X, reset=False, method="transform", empty_docs="drop")
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

    def _known_words(self) -> np.ndarray:
        """Which words of ``vocab_`` the model knows, ``(n_words,)`` bool: those with probability in
        some topic (a non-zero row of ``phi_``; a word absent from the training documents has
        none).  LIDA, whose smoothed Φ gives every word probability, counts the words that held a
        training token."""
        return np.asarray(self.phi_).sum(1) > 0

    def _transform_docs(self, X, empty_docs: str, infer) -> np.ndarray:
        """``transform`` for every family: ``infer(corpus) -> (n_docs, n_components)`` on the
        documents with a token of a known word (:meth:`_known_words`), the documents without
        tokens handled by ``empty_docs`` (see :meth:`_place_rows`).

        A document whose tokens are all of unknown words carries no evidence either: it gets the
        topic distribution of no evidence (:meth:`_no_evidence`; ``empty_docs="error"``: a
        :class:`~topicjax.data.CorpusError`), and a :class:`NoEvidenceWarning` names its row of
        ``X``.  ``infer`` may return ``(values, notes)``, ``notes`` a list of ``(indices of its
        documents, what happened to them)`` to warn about in the same way.  Every returned row is
        a distribution: a row that inference left without mass (or non-finite) gets the no-evidence
        distribution, with a warning naming it; a non-finite one is a
        :class:`~topicjax.core.errors.NumericalError`."""
        corpus, rows, n_rows = self._new_docs(X, empty_docs)
        x_rows = np.arange(corpus.n_docs) if rows is None else np.asarray(rows)  # the row of X of each document
        known = self._known_words()
        evidence = np.bincount(corpus.doc_ids, weights=np.where(known[corpus.word_ids], corpus.counts, 0),
                               minlength=corpus.n_docs) > 0
        blind = np.flatnonzero(~evidence)
        if blind.size:
            what = (f"{_rows_text(x_rows[blind])} of X {'has' if blind.size == 1 else 'have'} no word the model knows "
                    f"(each of its tokens is of a word this {type(self).__name__} learned nothing about, such as a "
                    "word absent from the training documents): nothing to infer topics from")
            if empty_docs == "error":
                raise CorpusError(f"{what}; transform(X, empty_docs='keep') gives such documents the topic "
                                  "distribution of no evidence")
            warnings.warn(f"{what}; they get the topic distribution of no evidence, as documents without tokens do",
                          NoEvidenceWarning, stacklevel=5)
        seen = np.flatnonzero(evidence)
        none = self._no_evidence()
        out = np.zeros((0, len(none)), np.float32)
        if seen.size:
            out = infer(corpus if seen.size == corpus.n_docs else corpus.subset(seen))
            out, notes = out if isinstance(out, tuple) else (out, [])
            out = np.asarray(out)
            for local, text in notes:
                warnings.warn(f"{_rows_text(x_rows[seen[np.asarray(local)]])} of X: {text}", NoEvidenceWarning,
                              stacklevel=5)
            total = out.sum(1)
            bad = np.flatnonzero(~np.isfinite(total))
            if bad.size:
                raise NumericalError(f"transform: the topic proportions of {_rows_text(x_rows[seen[bad]])} of X are "
                                     "not finite", reason="nonfinite")
            failed = np.flatnonzero(~(total > 0))
            if failed.size:
                warnings.warn(f"{_rows_text(x_rows[seen[failed]])} of X: inference left them no topic mass; they get "
                              "the topic distribution of no evidence", NoEvidenceWarning, stacklevel=5)
                out = out.copy()
                out[failed] = none
        values = np.empty((corpus.n_docs, len(none)), out.dtype)
        values[blind] = none
        values[seen] = out
        return self._place_rows(values, rows, n_rows, empty_docs)

    def _check_fitted(self):
        if not hasattr(self, "vocab_"):
            raise not_fitted(f"this {type(self).__name__} is not fitted yet; call fit first")

    # ---------------------------------------------------------------- fitted views
    def _set_components(self):
        """``components_`` (T x W) from ``phi_``."""
        self.components_ = np.ascontiguousarray(np.asarray(self.phi_).T)

    def get_topics(self) -> np.ndarray:
        """The topics' word distributions, ``(n_components, n_words)`` (gensim's ``get_topics``)."""
        self._check_fitted()
        return np.asarray(self.components_)

    def top_words(self, n: int = 10, phi=None) -> list[list[str]]:
        """The ``n`` most probable words of every topic (columns of ``phi_``), one list per topic
        in the order of the columns; an empty topic (:attr:`empty_topics_`) gets an empty list,
        as its column ranks no word (sorting a column of zeros, or of the prior alone, would list
        the first words of the vocabulary).  With ``phi`` (W x T) given, the words of its columns,
        none left out.

        A model fitted on a bare matrix knows its words as ``w0, w1, ...`` only (a warning says
        so): give it a Corpus, a DataFrame with word columns, or, in a ``Pipeline``, wrap the
        vectorizer in :class:`topicjax.data.CorpusVectorizer`.

        Raises:
            ValueError: ``n`` not an integer >= 1."""
        self._check_fitted()
        n = check_int(n, "n", 1)  # top_words(-3) would be every word but the last 3
        if is_placeholder_vocab(self.vocab_):
            warnings.warn(f"this {type(self).__name__} was fitted on a matrix without word names, so its words are "
                          "the placeholders w0, w1, ...; fit it on a Corpus, a DataFrame with word columns, or wrap "
                          "the vectorizer of a Pipeline in topicjax.data.CorpusVectorizer", UserWarning, stacklevel=2)
        live = self.topic_live_ if phi is None else None
        phi = np.asarray(self.phi_ if phi is None else phi)
        order = np.argsort(-phi, axis=0, kind="stable")[:n]
        return [[self.vocab_[i] for i in order[:, t]] if live is None or live[t] else []
                for t in range(phi.shape[1])]

    # ---------------------------------------------------------------- live, empty and background topics
    def _topic_live(self) -> np.ndarray:
        """``(T,)`` bool over the columns of ``phi_``: a topic is live when its φ column and its row
        of ``theta_`` (the training documents', where kept) hold mass and the family has not
        removed it (``topic_alive_`` > 0, ARTM).  Families whose Φ gives every topic mass from
        the prior alone override it (LIDA: the topics holding tokens)."""
        phi = np.asarray(self.phi_)
        live = phi.sum(0) > 0
        alive = getattr(self, "topic_alive_", None)
        if alive is not None and np.shape(alive) == live.shape:
            live &= np.asarray(alive) > 0
        theta = getattr(self, "theta_", None)
        if theta is not None and np.ndim(theta) == 2 and np.shape(theta)[0] == live.size and np.shape(theta)[1]:
            live &= np.asarray(theta).sum(1) > 0
        return live

    @property
    def topic_live_(self) -> np.ndarray:
        """Which topics are live, ``(T,)`` bool over the columns of ``phi_`` (rows of
        ``components_``, columns of :meth:`transform`): those holding tokens or mass in the fitted
        model.  The others are :attr:`empty_topics_`: listings leave them out or mark them
        (:meth:`top_words`, :meth:`print_topics`)."""
        self._check_fitted()
        return np.asarray(self._topic_live(), bool)

    @property
    def empty_topics_(self) -> list[str]:
        """Names (:meth:`get_feature_names_out`) of the topics that are not live
        (:attr:`topic_live_`): no token or mass in the fitted model."""
        names = self.get_feature_names_out()
        return [str(names[j]) for j in np.flatnonzero(~self.topic_live_)]

    @property
    def background_topics_(self) -> list[str]:
        """Names of the background topics (ARTM's ``background_topics``); none in the other
        families."""
        self._check_fitted()
        return []

    def print_topics(self, n: int = 10, *, file=None) -> list[str]:
        """Print one line per topic, ``name: its n top words``, and return the lines: a
        background topic is marked ``(background)``, an empty one ``(empty)`` without words
        (:attr:`background_topics_`, :attr:`empty_topics_`).  ``file``: where to print (default
        ``sys.stdout``).

        Raises:
            ValueError: ``n`` not an integer >= 1."""
        import sys

        words = self.top_words(n)
        names = [str(x) for x in self.get_feature_names_out()]
        background, live = set(self.background_topics_), self.topic_live_
        lines = []
        for t, name in enumerate(names):
            mark = " (background)" if name in background else ""
            lines.append(f"{name}{mark}: {' '.join(words[t])}" if live[t] else f"{name}{mark} (empty)")
        out = sys.stdout if file is None else file
        for line in lines:
            print(line, file=out)
        return lines

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the columns of :meth:`transform` (the topics): ``topic_names_`` where the
        model has them (ARTM, PLSA), else ``"<class name lower-case><i>"`` as scikit-learn names
        the components of its decompositions.  ``input_features``, if given, must match the
        fitted input (its length, and ``feature_names_in_`` when the model was fitted on a
        DataFrame)."""
        self._check_fitted()
        if input_features is not None:
            given = np.asarray(input_features, dtype=object)
            known = getattr(self, "feature_names_in_", None)
            if given.ndim != 1 or given.size != self.n_features_in_:
                raise ValueError(f"input_features should have length equal to the number of features "
                                 f"({self.n_features_in_}), got {given.size}")
            if known is not None and not np.array_equal(given, known):
                raise ValueError("input_features is not equal to feature_names_in_")
        n_out = np.shape(self.phi_)[1]
        names = getattr(self, "topic_names_", None)
        if names is None or len(names) != n_out:
            names = [f"{type(self).__name__.lower()}{i}" for i in range(n_out)]
        return np.asarray([str(x) for x in names], dtype=object)

    # ---------------------------------------------------------------- held-out evaluation
    def _heldout_log_likelihood(self, observed: Corpus, heldout: Corpus) -> float:
        """ln p(heldout | observed) summed over the held-out tokens (float64): Θ of the documents
        inferred on ``observed`` by :meth:`transform` (Φ fixed), then ARTM eq. 4 on ``heldout``,
        ``Σ n'_dw ln Σ_t φ_wt θ_td``.  Families whose predictive is not a point estimate of Θ
        override it (TTMM: the exact conditional of its theme mixture)."""
        theta = np.asarray(self.transform(observed), np.float64).T
        return metrics.log_likelihood(self.phi_, theta, heldout)

    def completion_score(self, X, *, seed: int = SCORE_SEED, fraction: float = 0.5) -> tuple[float, int]:
        """``(ln p, n)``: the held-out log-likelihood of documents ``X`` by document completion
        and the number of held-out tokens it sums over; :meth:`score` is ``ln p / n``.

        The protocol of ARTM sec. 5 (LIDA eq. 44-45, PTM eq. 32 with token halves):

        1. tokens of words that the model gives probability zero in every topic (words absent
           from the training documents) are left out, as ARTM sec. 5 prescribes; documents left
           with fewer than 2 tokens cannot be split and are left out too
           (:func:`completion_corpus`; no document left is an error);
        2. each remaining document's tokens are split at random, each token going to the
           observed half with probability ``fraction`` (``Corpus.completion_split("tokens")``,
           seeded by ``seed``: the same split for every model);
        3. the topic proportions are inferred on the observed half with the topics fixed
           (:meth:`transform`: EM on Θ for PLSA/ARTM, every topic allowed for PTM, the
           document-completion sampler for LIDA), and the held-out half is scored,
           ``Σ n'_dw ln Σ_t φ_wt θ_td``; TTMM scores the exact conditional
           ``ln P(held | observed) = ln P(d) - ln P(observed)`` of its theme mixture (eq. 3).

        Deterministic for a fixed ``seed`` (and, for LIDA, ``random_state``) on one device.
        """
        self._check_fitted()
        corpus = completion_corpus(self._new_corpus(X), self.phi_)
        observed, heldout = corpus.completion_split("tokens", fraction=fraction, seed=seed)
        return float(self._heldout_log_likelihood(observed, heldout)), int(heldout.n_tokens)

    def score(self, X, y=None) -> float:
        """Held-out log-likelihood per token by document completion (higher is better), the
        default score of ``GridSearchCV``: ``ln p / n`` of :meth:`completion_score` (split
        seeded by :data:`SCORE_SEED`, so every candidate is scored on the same halves).
        ``y`` is ignored."""
        ll, n = self.completion_score(X)
        return ll / n

    def perplexity(self, X, heldout=None) -> float:
        """Held-out perplexity ``exp(-ln p / n)`` (ARTM eq. 56 on held-out tokens).  Without
        ``heldout``: by document completion of ``X``, ``exp(-score(X))``.  With ``heldout`` (the
        same documents, e.g. the two parts of ``Corpus.completion_split``): Θ inferred on ``X``,
        ``heldout`` scored (a held-out word the model gives probability zero makes it infinite)."""
        if heldout is None:
            return float(np.exp(-self.score(X)))
        observed, held = self._new_corpus(X), self._new_corpus(heldout)
        if observed.n_docs != held.n_docs:
            raise ValueError(f"X has {observed.n_docs} documents but heldout has {held.n_docs}")
        return float(np.exp(-self._heldout_log_likelihood(observed, held) / held.n_tokens))

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X)`` then the training documents' topic proportions, ``(n_docs, n_components)``."""
        self.fit(X, y, **fit_params) if y is not None else self.fit(X, **fit_params)
        return np.asarray(self.theta_).T

    # ---------------------------------------------------------------- many fits
    def _clone_with(self, **params):
        return clone(self).set_params(**params)

    def _clone_with_input(self, **params):
        """A clone with ``params`` that also holds what this estimator read from its input ``X``
        (``vocab_``, ``n_features_in_``, ``feature_names_in_`` where it has one): a model of
        :meth:`fit_many` fitted on the corpus this estimator prepared."""
        model = self._clone_with(**params)
        for name in ("vocab_", "n_features_in_", "feature_names_in_"):
            if hasattr(self, name):
                setattr(model, name, getattr(self, name))
        return model

    @staticmethod
    def _batch_models(finals, recs, n_iter, status, *, seeds, clone, error, seconds: float = 0.0):
        """The one loop that unstacks the stacked results of a compiled batch
        (:func:`topicjax.core.driver.run_many`) into the models of :meth:`fit_many`.

        Yields ``(model, state, records)`` for each model ``g`` in order: ``model = clone(g)`` (a
        fresh estimator with model ``g``'s settings) with ``seed_ = seeds[g]`` (the seed it
        started from, as :meth:`_seed` records it when a fit starts; the family then sets its
        fitted attributes through its ``_set_fitted``), ``state`` model ``g``'s final state (its slice of
        ``finals``) and ``records`` one dict per iteration it ran: ``iteration``, the algorithm's
        record fields (nested dicts flattened to ``"outer/inner"``; scalars as Python numbers,
        arrays as numpy) and ``seconds``.  A model whose fit failed (its ``status`` is
        non-finite or a collapse) raises ``error(g, n_done, status)`` when the loop reaches it."""
        flat = driver.flatten_records(jax.tree.map(host_array, recs))
        n_iter, status = np.asarray(n_iter), np.asarray(status)
        for g in range(status.shape[0]):
            n = int(n_iter[g])
            if int(status[g]) >= driver.NONFINITE:
                raise error(g, n, int(status[g]))
            rows = [{"iteration": i + 1, **{k: v[g, i].item() if np.ndim(v[g, i]) == 0 else v[g, i]
                                             for k, v in flat.items()}, "seconds": seconds} for i in range(n)]
            model = clone(g)
            model.seed_ = seeds[g]
            yield model, jax.tree.map(lambda a: a[g], finals), rows

    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, vmap_size=None,
                 workers=None) -> list:
        """Fit many models: clones of this estimator with ``random_state=seeds[g]``,
        ``n_components=n_topics[g]`` and the parameters ``params = {name: [value per model]}``,
        each equal to its separate :meth:`fit`.

        The signature is the same for every family (ARTM adds ``taus``, PTM ``n_restarts``):
        ``mode`` is ``"sequential"``, ``"vmap"`` (``vmap_size`` models side by side),
        ``"devices"`` or ``"threads"`` (``workers`` threads), as in
        :func:`topicjax.core.driver.run_many`.  This generic version, used where a family has no
        compiled batch for the settings given, runs the fits on the host, one after the other
        (``mode=None`` or ``"sequential"``) or in ``workers`` threads (``"threads"``; JAX releases
        the GIL while it computes); ``"vmap"`` and ``"devices"`` run them one after the other too,
        with a :class:`FitManyFallbackWarning` saying why."""
        return self._fit_many_on_host(X, y, seeds=seeds, n_topics=n_topics, params=params, mode=mode,
                                      vmap_size=vmap_size, workers=workers,
                                      why=f"{type(self).__name__} has no compiled batch of fits")

    def _fit_many_on_host(self, X, y, *, seeds, n_topics, params, mode, vmap_size, workers, why: str) -> list:
        """The host batch of :meth:`fit_many`; ``why`` says, in the fallback warning, why these fits
        cannot form a compiled batch."""
        settings = {}
        if seeds is not None:
            settings["random_state"] = int_sequence(seeds, "seeds", 0)
        if n_topics is not None:
            settings["n_components"] = int_sequence(n_topics, "n_topics", 1)
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"params must be a mapping {{name: [value per model]}}, got a {type(params).__name__} "
                             f"({params!r}"[:300] + ")")
        for name, values in (params or {}).items():
            if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
                raise ValueError(f"params[{name!r}] must be a list of one value per model, got {values!r}"[:300])
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
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if vmap_size is not None:
            check_int(vmap_size, "vmap_size", 1)
        if mode in ("vmap", "devices"):
            warnings.warn(f"fit_many: {why}, so mode={mode!r} runs the {G} fits one after the other on the host; "
                          "pass mode='sequential' or 'threads' to choose that", FitManyFallbackWarning, stacklevel=3)
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
        """Save the fitted model to folder ``path`` (``arrays.npz`` + ``meta.json``); exact round trip.
        Only a new folder, an empty one or one holding a saved model (replaced; other files in it
        kept) is written; anything else is refused (:func:`topicjax.persistence.save_folder`)."""
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


for _name in FULL_PRECISION_METHODS:  # the base class's own implementations
    if _name in TopicModelBase.__dict__:
        _fn = numerics.full_precision(TopicModelBase.__dict__[_name])
        _fn._full_precision = True
        setattr(TopicModelBase, _name, _fn)
