"""The TTMM estimator (see :mod:`topicjax.ttmm` for the model and the solvers)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver, layout
from topicjax.core.errors import NumericalError
from topicjax.core.random import as_key
from topicjax.data.corpus import Corpus
from topicjax.core import validation
from topicjax.estimator import TopicModelBase, host_array, int_sequence
from topicjax.persistence import ArraySpec, SavedModelError
from topicjax.ttmm import em as ttmm_em
from topicjax.ttmm import sgd
from topicjax.ttmm.params import TTMMParams, random_params
from topicjax.ttmm.sweeps import (doc_log_likelihood, doc_rows, doc_topic_posterior, theme_layout, theme_posterior,
                                  token_topic_shares)
from topicjax.core.compiled import jit

__all__ = ["TTMM"]


def _total(rec) -> float:
    """A recorded double-float L in float64."""
    return float(np.float64(rec["hi"]) + np.float64(rec["lo"]))


def _per_doc(sweep, params, data, n_docs: int) -> np.ndarray:
    """``sweep(params, data, rows)`` (a compiled sweep of :mod:`topicjax.ttmm.sweeps`) on the host,
    cut to the ``n_docs`` documents: ``rows`` is the number of documents rounded up to a bucket
    (:func:`topicjax.ttmm.sweeps.doc_rows`, unless ``TOPICJAX_BUCKETS=off``), so that corpora of
    similar size share the program; the rows after the documents have no token."""
    return host_array(sweep(params, data, doc_rows(n_docs, layout.buckets_on())))[:n_docs]


def _em_logliks(records, params, data, n_docs: int) -> list[float]:
    """L (eq. 4) after 0, 1, ..., ``len(records)`` EM iterations, float64: each record holds L of
    the parameters its iteration started from, and L of the final ``params`` is computed here."""
    final = float(np.sum(_per_doc(doc_log_likelihood, params, data, n_docs).astype(np.float64)))
    return [_total(r) for r in records] + [final]


_DEFAULT_OPTIMIZER = []


def _default_optimizer():
    """``optax.adam(0.05)``, made once (a new optimiser object would recompile the epoch)."""
    if not _DEFAULT_OPTIMIZER:
        import optax

        _DEFAULT_OPTIMIZER.append(optax.adam(0.05))
    return _DEFAULT_OPTIMIZER[0]


class TTMM(TopicModelBase):
    """Theme Topic Mixture Model fitted by EM (eq. 6-11) or by SGD with an optax optimiser (eq. 12-15).

    Parameters
    ----------
    n_components: K, the number of topics; the only positional parameter, ``TTMM(30, n_themes=10)``.
    n_themes: J, the number of themes (document clusters); keyword-only.
    solver: ``"em"`` (exact EM; the log-likelihood never decreases) or ``"sgd"`` (minibatch
        gradient steps on the softmax logits with ``optimizer``; ``max_iter`` counts epochs).
    optimizer: an ``optax.GradientTransformation`` for ``solver="sgd"``; default
        ``optax.adam(0.05)``.  Not saved by :meth:`save` (pass it to :meth:`load`).
    batch_size: documents per minibatch (SGD).
    max_iter: EM iterations or SGD epochs.
    tol: stop when the relative change of L between iterations/epochs falls below ``tol`` (0: never).
    random_state: seed of the initial parameters and of the SGD document order.  The same seed
        gives the same model on the same device (bits may differ between CPU and GPU).
    chunk: non-zeros per chunk of the sparse sweeps (default: about 4M / J values per chunk).
        Fits and inference round the layout's pieces and the per-document tables up to buckets
        (:func:`topicjax.core.layout.bucket_size`: corpora of similar size share the compiled
        programs; the results are the exact shapes') unless ``TOPICJAX_BUCKETS=off``.
    progress: show a tqdm progress bar.

    Fitted attributes: ``pi_`` (J,), ``tau_`` (J, K), ``beta_`` (K, W) (``phi_ = beta_.T``,
    ``components_ = beta_``), ``theta_`` (K, D): P(t|d) of eq. 18 for the training documents,
    ``loglik_history_`` (L of eq. 4 after 0, 1, ..., ``n_iter_`` iterations; float64 totals),
    ``n_iter_``, ``vocab_``.

    ``transform`` gives P(t|d) of eq. 18 (n_docs, K); ``predict_proba`` the theme posteriors P(h|d)
    (eq. 6); ``predict`` the most likely theme; ``score_samples`` the exact log P(d) (eq. 3) (L of
    eq. 4 is their sum); ``score`` the held-out log-likelihood per token by document completion,
    the exact ``ln P(held | observed)`` (see :meth:`TopicModelBase.completion_score`).
    """

    _saved_arrays = ("pi_", "tau_", "beta_", "theta_")
    _saved_meta = ("loglik_history_", "history_", "n_iter_")
    _unsaved_params = ("optimizer",)
    _array_specs = {
        "pi_": ArraySpec(("J",), nonneg=True, simplex=0),
        "tau_": ArraySpec(("J", "T"), nonneg=True, simplex=1),
        "beta_": ArraySpec(("T", "W"), nonneg=True, simplex=1),
        "theta_": ArraySpec(("T", "D"), nonneg=True, simplex=0),
    }
    _meta_specs = {"loglik_history_": "numbers", "history_": "records", "n_iter_": "int"}
    _meta_required = ("loglik_history_", "history_", "n_iter_")

    _formerly_first = "n_themes"

    def __init__(self, n_components=10, *, n_themes=10, solver="em", optimizer=None, batch_size=64,
                 max_iter=100, tol=1e-6, random_state=0, chunk=None, progress=True):
        self.n_themes = n_themes
        self.n_components = n_components
        self.solver = solver
        self.optimizer = optimizer
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.chunk = chunk
        self.progress = progress

    _constraints = {
        "n_themes": validation.integer(1),
        "solver": validation.one_of("em", "sgd"),
        "optimizer": validation.protocol("an optax GradientTransformation", "init", "update"),
        "batch_size": validation.integer(1),
        "chunk": validation.optional(validation.integer(1)),
        "progress": validation.boolean(),
    }

    # ---------------------------------------------------------------- checks
    def _validate_params(self):
        """Every parameter through its validator, then the constraint between parameters."""
        super()._validate_params()
        if self.optimizer is not None and self.solver != "sgd":
            raise ValueError("optimizer is only used by solver='sgd'; set solver='sgd' or optimizer=None")

    def _refuse_sizes(self, corpus: Corpus, models: int = 1) -> None:
        """Refuse, before anything is allocated, numbers of themes J and topics K whose arrays
        cannot fit (:func:`topicjax.core.validation.refuse_size`).  Counted, float32: the parameters
        τ (J x K) and β (K x W) and the EM step's new ones, its theme-word sums A and R (J x W each)
        and the theme posteriors P (D x J); ``models`` restarts hold their parameters side by side.
        The parameter named is the one whose arrays are the larger part."""
        J, K, W, D = int(self.n_themes), int(self.n_components), corpus.n_words, corpus.n_docs
        m = models + 1
        by_j = 4.0 * (m * K + 2 * W + D)  # bytes per theme, K fixed
        by_k = 4.0 * m * (J + W)  # bytes per topic, J fixed
        name, value, per, fixed = (("n_themes", J, by_j, 4.0 * m * K * W) if J * by_j >= K * by_k
                                   else ("n_components", K, by_k, 4.0 * (2 * J * W + D * J)))
        fits = f"{models} TTMM fits hold" if models > 1 else "one TTMM fit holds"
        validation.refuse_size(name, value, per, fixed,
                      what=(f"with {J:,} themes and {K:,} topics on {W:,} words and {D:,} documents, {fits} τ (J x K), "
                            "β (K x W), the EM step's new τ and β, its sums A, R (J x W) and the theme posteriors "
                            "(D x J) in float32"))

    # ---------------------------------------------------------------- fitting
    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10):
        """Fit on a :class:`Corpus` or a (documents x words) count matrix (labels are ignored).
        ``checkpoint``: a folder where the fit's progress (with SGD, the document-order generator
        too) is saved every ``checkpoint_every`` iterations or epochs, and from which a killed fit
        resumes, to the same model bit for bit on CPU (:mod:`topicjax.core.checkpoint`)."""
        self._validate_params()
        J, K = int(self.n_themes), int(self.n_components)
        corpus = self._train_corpus(X)
        corpus.check_topics(K)
        self._refuse_sizes(corpus)
        ckpt = self._open_checkpoint(checkpoint, checkpoint_every, corpus)
        D, W = corpus.n_docs, corpus.n_words
        data, rows, n_real = self._fit_layout(corpus)
        n_words = jax.device_put(np.int32(W))
        seed = self._seed(ckpt)
        if self.solver == "em":
            state = ttmm_em.init_compiled(as_key(seed), J, K, self._words(W), rows, real_words=n_words)
            state, records = driver.run(ttmm_em.TTMM_EM, None, state, (data, n_real), max_iter=int(self.max_iter),
                                        tol=float(self.tol), progress=self.progress, desc="TTMM EM",
                                        checkpoint=None if ckpt is None else ckpt.run("fit"))
            params = state.params
            lls = _em_logliks(records, params, data, D)
        else:
            params, lls, records = self._fit_sgd(corpus, data, as_key(seed), seed, ckpt)
        self._set_fitted(params, data, D, records, lls, W)
        return self

    def _fit_layout(self, corpus: Corpus):
        """``(data, rows, n_docs)`` of a fit: the layout (:func:`theme_layout`, pieces in buckets
        unless ``TOPICJAX_BUCKETS=off``), the rows of the per-document tables
        (:func:`topicjax.ttmm.sweeps.doc_rows`) and the number of documents on the device (traced
        by the steps, which leave the padding rows out of L and π: corpora of similar size, such
        as the folds of a cross-validation, share the compiled steps)."""
        buckets = layout.buckets_on()
        data = theme_layout(corpus, int(self.n_themes), self.chunk, buckets=buckets)
        return data, doc_rows(corpus.n_docs, buckets), jax.device_put(np.int32(corpus.n_docs))

    @staticmethod
    def _words(n_words: int) -> int:
        """Columns of β in the compiled EM programs and inference sweeps: the vocabulary rounded up
        to a bucket (:func:`topicjax.core.layout.bucket_size`, a multiple of
        :data:`~topicjax.core.layout.DOC_STEP`, at least :data:`~topicjax.core.layout.WORD_FLOOR`) unless
        ``TOPICJAX_BUCKETS=off``.  The columns after
        the words are 0 and have no token, so EM keeps them 0 (their A = τβ is 0, their sums R
        too); the estimator drops them on the host.  (SGD keeps the exact vocabulary: its softmax
        would give them mass.)"""
        return layout.bucket_size(n_words, layout.DOC_STEP, layout.WORD_FLOOR) if layout.buckets_on() else int(n_words)

    def _set_fitted(self, params: TTMMParams, data, n_docs: int, records: list, lls: list, n_words: int) -> None:
        """Every fitted attribute, the one place they are written (:meth:`fit` with either solver,
        each model of :meth:`fit_many`): the parameters ``params`` (β cut to its ``n_words`` words), Θ of eq. 18 for the ``n_docs``
        training documents of ``data``, ``loglik_history_`` = ``lls`` (L after 0, 1, ...,
        ``len(records)`` iterations), ``history_`` from the driver's ``records`` (the objective of
        iteration i is ``lls[i]``) and ``n_iter_`` (``seed_`` is written when the fit starts)."""
        self.pi_, self.tau_, self.beta_ = (host_array(x) for x in params)
        self.beta_ = self.beta_[:, :n_words]  # the words: β's columns after them (a bucket's) are 0
        self.theta_ = _per_doc(doc_topic_posterior, params, data, n_docs).T
        self.loglik_history_ = [float(v) for v in lls]
        self.history_ = [{"iteration": r["iteration"], "objective": o, "seconds": r["seconds"]}
                         for r, o in zip(records, lls[1:])]
        self.n_iter_ = len(records)
        self._set_components()

    def _fit_sgd(self, corpus: Corpus, data, key, seed, ckpt=None):
        J, K = int(self.n_themes), int(self.n_components)
        D, W = corpus.n_docs, corpus.n_words
        optimizer = self.optimizer if self.optimizer is not None else _default_optimizer()
        buckets = layout.buckets_on()
        rows = doc_rows(D, buckets)  # per-document values of the compiled epoch (padding rows hold 0)
        n_real = jax.device_put(np.int32(D))
        params0 = random_params(key, J, K, W)
        state = sgd.sgd_init(params0, optimizer, rows)
        ll_docs = np.zeros(rows, np.float32)
        ll_docs[:D] = _per_doc(doc_log_likelihood, params0, data, D)
        state = state._replace(doc_loglik=jax.device_put(ll_docs))
        ll0 = float(np.sum(ll_docs.astype(np.float64)))
        batch_size = min(int(self.batch_size), D)
        capacity = sgd.batch_capacity(corpus, batch_size)
        # the batches are packed to the corpus's capacity and padded to its bucket with empty entries
        width = layout.bucket_size(capacity, 128) if buckets else capacity
        rng = np.random.default_rng(seed if isinstance(seed, (int, np.integer)) else 0)
        n_batches = []  # minibatches of every epoch, to name a failing step

        def before(epoch, history):
            batches = sgd.make_batches(corpus, rng.permutation(D), batch_size, capacity)
            n_batches.append(batches.mask.shape[0])
            # few distinct shapes: few compilations
            n = batches.mask.shape[0]
            padded = layout.bucket_size(n, 8) if buckets else -(-n // 8) * 8
            return jax.tree.map(jnp.asarray, sgd.pad_entries(sgd.pad_batches(batches, padded), width)), data, n_real

        def explain(s, args, epoch, reason):
            failed = jit(sgd.epoch_step, static_argnums=2)(s, args, (optimizer, rows))
            bad = int(failed.bad_step)
            if bad < 0:
                return "lower the learning rate or clip the gradients"
            n_b = n_batches[-1]
            return (f"the optimizer produced non-finite parameters at step {bad + 1} (epoch {epoch}, minibatch "
                    f"{bad - int(s.step) + 1} of {n_b}); lower the learning rate or clip the gradients")

        def set_host(host):  # the document-order generator and the minibatch counts of the epochs done
            rng.bit_generator.state = host["rng"]
            n_batches[:] = host["n_real"]

        run_ckpt = None if ckpt is None else ckpt.run(
            "fit", get_host=lambda: {"rng": rng.bit_generator.state, "n_real": list(n_batches)}, set_host=set_host)
        try:
            state, records = driver.run(sgd.TTMM_SGD, (optimizer, rows), state, None, max_iter=int(self.max_iter),
                                        tol=float(self.tol), progress=self.progress, desc="TTMM SGD", before=before,
                                        explain=explain, checkpoint=run_ckpt)
        except NumericalError as e:
            raise NumericalError(f"TTMM SGD: {e.blame}", iteration=e.iteration, reason=e.reason, blame=e.blame,
                                 state=e.state) from None
        lls = [ll0] + [_total(r) for r in records]
        if lls[-1] < lls[0]:
            # a step too large can push logits so far that probabilities hit the clamp and the
            # gradient vanishes: finite parameters, but a fit worse than its starting point
            warnings.warn(
                f"TTMM SGD: the log-likelihood decreased from {lls[0]:.6g} to {lls[-1]:.6g}; "
                "the learning rate is probably too large", RuntimeWarning, stacklevel=3,
            )
        return sgd.params_of_logits(state.logits), lls, records

    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, vmap_size=None,
                 workers=None) -> list:
        """Many fits in one call: random restarts (``seeds``) of the EM solver run as one
        compiled batch (:func:`topicjax.core.driver.run_many`; ``mode``, ``vmap_size``,
        ``workers`` as there), each equal to its separate :meth:`fit`; other settings
        (``n_topics``, ``params``, the SGD solver) are fitted one after the other by
        :meth:`TopicModelBase.fit_many` (``mode="vmap"`` or ``"devices"`` then warns that it falls
        back)."""
        if n_topics is not None or params or seeds is None or self.solver != "em":
            why = ("TTMM's SGD epochs draw their minibatches on the host" if self.solver != "em"
                   else "TTMM's compiled batch varies seeds only, not n_topics or params")
            return self._fit_many_on_host(X, y, seeds=seeds, n_topics=n_topics, params=params, mode=mode,
                                          vmap_size=vmap_size, workers=workers, why=why)
        self._validate_params()
        J, K = int(self.n_themes), int(self.n_components)
        seeds = int_sequence(seeds, "seeds", 0)
        if not seeds:
            raise ValueError("fit_many: no models")
        corpus = self._train_corpus(X)
        corpus.check_topics(K)
        self._refuse_sizes(corpus, models=len(seeds))
        D, W = corpus.n_docs, corpus.n_words
        data, n_rows, n_real = self._fit_layout(corpus)
        keys = jnp.stack([as_key(s, "seeds") for s in seeds])
        n_words = jax.device_put(np.int32(W))
        states = jax.vmap(lambda k: ttmm_em.em_init(k, J, K, self._words(W), n_rows, real_words=n_words))(keys)
        finals, recs, n_done, status = driver.run_many(ttmm_em.TTMM_EM, None, states, (data, n_real),
                                                       batched=(False, False),
                                                       max_iter=int(self.max_iter), tol=float(self.tol), mode=mode,
                                                       vmap_size=vmap_size, workers=workers)

        def error(g, n, status):
            return NumericalError(f"TTMM fit_many (seed {seeds[g]}): non-finite parameters at iteration {n + 1}",
                                  iteration=n + 1, reason="nonfinite")

        models = []
        for m, state, rows in self._batch_models(finals, recs, n_done, status, seeds=seeds, error=error,
                                                 clone=lambda g: self._clone_with_input(random_state=seeds[g])):
            m._set_fitted(state.params, data, D, rows, _em_logliks(rows, state.params, data, D), W)
            models.append(m)
        return models

    def _saved_sizes(self) -> dict:
        return {**super()._saved_sizes(), "J": int(self.n_themes)}

    @classmethod
    def load(cls, path, **params):
        model = super().load(path, **params)
        if len(model.loglik_history_) != model.n_iter_ + 1:
            raise SavedModelError(f"{path}: meta.json field 'loglik_history_' has {len(model.loglik_history_)} values, "
                                  f"expected n_iter_ + 1 = {model.n_iter_ + 1}")
        return model

    # ---------------------------------------------------------------- inference
    def _params(self) -> TTMMParams:
        """The fitted parameters on the device, β with zero columns up to the vocabulary's bucket
        (:meth:`_words`: models over vocabularies of similar size share the inference sweeps)."""
        self._check_fitted()
        beta = np.asarray(self.beta_, np.float32)
        beta = np.concatenate([beta, np.zeros((beta.shape[0], self._words(beta.shape[1]) - beta.shape[1]), np.float32)], 1)
        return TTMMParams(jax.device_put(np.asarray(self.pi_, np.float32)), jax.device_put(np.asarray(self.tau_, np.float32)),
                          jax.device_put(beta))

    def _data(self, X):
        corpus = self._new_corpus(X)
        return corpus, self._layout(corpus)

    def _layout(self, corpus: Corpus):
        """The inference layout of ``corpus`` (:func:`theme_layout`; pieces in buckets unless
        ``TOPICJAX_BUCKETS=off``, read with :func:`_per_doc`)."""
        return theme_layout(corpus, len(self.pi_), self.chunk, buckets=layout.buckets_on())

    @property
    def phi_(self) -> np.ndarray:
        """β transposed, (W, K): the word-topic matrix in the orientation of the other models."""
        return np.asarray(self.beta_).T

    def transform(self, X, empty_docs="keep") -> np.ndarray:
        """Topic posteriors P(t|d) of eq. 18, ``(n_docs, n_components)`` (see :func:`doc_topic_posterior`).

        ``X``: a :class:`~topicjax.data.Corpus` over the model's vocabulary or a count matrix
        whose columns ARE the model's words in ``vocab_`` order (a matrix has no vocabulary: only
        its width is checked, permuted columns give other posteriors silently).
        ``empty_docs``: documents without tokens get the posterior of no evidence, which is the
        prior ``P(t) ∝ Σ_j π_j τ_jt`` (eq. 18 with no words; ``"keep"``), are left out
        (``"drop"``: one row per document with tokens, in order) or are an error (``"error"``).
        """
        params = self._params()
        return self._transform_docs(
            X, empty_docs, lambda c: _per_doc(doc_topic_posterior, params, self._layout(c), c.n_docs))

    def _no_evidence(self) -> np.ndarray:
        prior = np.asarray(self.pi_, np.float64) @ np.asarray(self.tau_, np.float64)
        return prior / prior.sum()

    def topic_shares(self, X) -> np.ndarray:
        """Expected topic shares of the documents' tokens, ``(n_docs, n_components)`` (see
        :func:`token_topic_shares`)."""
        corpus, data = self._data(X)
        return _per_doc(token_topic_shares, self._params(), data, corpus.n_docs)

    def predict_proba(self, X) -> np.ndarray:
        """Theme posteriors P(h|d) (eq. 6), ``(n_docs, n_themes)``."""
        corpus, data = self._data(X)
        return _per_doc(theme_posterior, self._params(), data, corpus.n_docs)

    def predict(self, X) -> np.ndarray:
        """The most likely theme of each document, ``(n_docs,)``."""
        return np.argmax(self.predict_proba(X), axis=1)

    def score_samples(self, X) -> np.ndarray:
        """Exact log P(d) (eq. 3) of each document, float64 ``(n_docs,)``."""
        corpus, data = self._data(X)
        return _per_doc(doc_log_likelihood, self._params(), data, corpus.n_docs).astype(np.float64)

    def _heldout_log_likelihood(self, observed: Corpus, heldout: Corpus) -> float:
        """The exact conditional ``ln P(held | observed) = ln P(observed + held) - ln P(observed)``
        (eq. 3) summed over the documents: the theme posterior of the observed half (eq. 6)
        weighs each theme's predictive of the held-out half (used by :meth:`score`)."""
        both = Corpus.from_entries(np.concatenate([observed.doc_ids, heldout.doc_ids]),
                                   np.concatenate([observed.word_ids, heldout.word_ids]),
                                   np.concatenate([observed.counts, heldout.counts]), vocab=observed.vocab,
                                   n_docs=observed.n_docs)
        return float(np.sum(self.score_samples(both) - self.score_samples(observed)))
