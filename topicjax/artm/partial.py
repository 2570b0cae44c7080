"""``partial_fit`` for ARTM and PLSA: one step of the online algorithm per call.

Each call is one batch of BigARTM's online algorithm (ARTM sec. 4), the step
:func:`topicjax.artm.online.batch_step` of :func:`topicjax.scale.online.fit_online`, with its
state kept on the estimator (``online_state_``):

1. Θ of the batch's documents starts from uniform and takes ``doc_passes`` iterations of
   eq. 16 with Φ fixed (``doc_passes``: the estimator's, default 10 as in BigARTM);
2. one E-step gives the batch's counts ``n̂_wt`` (eq. 7);
3. ``n_wt ← (1 - ρ) n_wt + ρ n̂_wt`` with ``ρ = (learning_offset + t)^(-learning_decay)`` (``t``
   the number of earlier updates; BigARTM's ``tau0`` and ``kappa``), and Φ is the regularized
   M-step (eq. 15) of ``n_wt``.

So ``partial_fit`` over the batches of a store, in order, is ``fit_online`` over that store
(one pass, ``update_every=1``; tested).  The first call starts from the Φ that :meth:`fit` would
start from (the same ``random_state``); on a model fitted by :meth:`fit` (or loaded), the first
call starts from its Φ with no accumulated counts.  Regularizers: those of the online algorithm
(bound to the batch's shape; per-document regularizers and schedules of the score history are
refused); a schedule ``tau(iteration)`` is evaluated at the update number ``t + 1`` (tabulated
for ``max_iter`` updates, its last value after that).  Modalities, classes (``y`` is
ignored) and ``doc_passes=None`` are those of the offline fit only.

After a call: ``phi_``, ``components_``, ``history_`` (one record per call: ``iteration``,
``objective`` = log-likelihood of the batch under the Φ before its update, ``perplexity``,
``rho``, ``seconds``), ``n_iter_``, ``n_batch_iter_`` (updates so far, as scikit-learn's LDA) and
everything :meth:`transform` needs.  ``theta_`` is None: the documents of a stream are not kept
(use :meth:`transform`).

The fitted state of an online fit is built in one place, :meth:`PartialFitMixin._take_online_state`
(which writes it through ARTM's one ``_set_fitted``, the writer of every fit's attributes): by
``partial_fit`` on the estimator itself, and by :meth:`PartialFitMixin._from_online_state` (a new
fitted ARTM) for :func:`topicjax.scale.online.fit_online` and the command line's ``fit-online``.

>>> import topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=200, seed=0)
>>> model = tj.PLSA(10, progress=False)
>>> for first in range(0, 200, 50):
...     model = model.partial_fit(corpus.subset(range(first, first + 50)))
>>> model.n_batch_iter_, model.components_.shape
(4, (10, 25))
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from topicjax.artm import setup
from topicjax.core import layout
from topicjax.core.errors import NumericalError
from topicjax.core.random import as_key
from topicjax.core.validation import refuse_online_topics
from topicjax.regularizers import Context
from topicjax.artm import online
from topicjax.core.compiled import jit

__all__ = ["PartialFitMixin", "DEFAULT_DOC_PASSES"]

#: Θ iterations per batch when ``doc_passes`` is None (BigARTM's ``num_document_passes``)
DEFAULT_DOC_PASSES = 10

_step = jit(online.batch_step, static_argnums=(4, 5))


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def batch_layout(corpus, dtype=np.float32) -> tuple[layout.DocWordCounts, int]:
    """The batch in the sliced layout, its documents padded to a power of two (at least 8) and its
    chunks to a power of two, so that a stream of batches of varying sizes compiles few shapes;
    returns the layout and the padded number of documents (padding documents are empty)."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    n_docs = max(8, _pow2(corpus.n_docs))
    offsets = np.concatenate([offsets, np.full(n_docs - corpus.n_docs, offsets[-1])])
    n_pieces = int((-(-np.diff(offsets) // layout.PIECE)).sum())
    k = min(layout.DEFAULT_CHUNK // layout.PIECE, _pow2(n_pieces))
    n_chunks = _pow2(-(-n_pieces // k))
    arrays = layout.sliced_layout(offsets, corpus.word_ids, corpus.counts, layout.PIECE, k, n_chunks, dtype=dtype)
    return layout.DocWordCounts(*(jnp.asarray(a) for a in arrays)), n_docs


class PartialFitMixin:
    """``partial_fit`` (see the module docstring) for :class:`~topicjax.artm.ARTM` and PLSA."""

    def _online_settings(self):
        if self.label_weight is not None:
            raise ValueError("partial_fit learns without classes: label_weight must be None")
        if self.modality_weights:
            raise ValueError("partial_fit learns one modality: modality_weights must be None")
        return online.OnlineStatic(int(self.doc_passes or DEFAULT_DOC_PASSES), float(self.learning_decay),
                                   float(self.learning_offset))

    def _online_continues(self) -> bool:
        return getattr(self, "online_state_", None) is not None and getattr(self, "_online_phi", None) is self.phi_

    def partial_fit(self, X, y=None):
        """Update the model with one batch of documents ``X`` (a Corpus or a count matrix); see
        :mod:`topicjax.artm.partial`.  ``y`` is ignored, as by every unsupervised scikit-learn
        estimator (classes are learned by :meth:`fit` only)."""
        self._validate_params()
        static = self._online_settings()
        fitted = self.__sklearn_is_fitted__()
        corpus = self._new_corpus(X) if fitted else self._train_corpus(X)
        if corpus.modalities is not None and len(corpus.modality_names) > 1:
            raise ValueError("partial_fit learns one modality; the batch has modalities "
                             f"{list(corpus.modality_names)} (use fit, or select_modality)")
        T, W = int(self.n_components), corpus.n_words
        corpus.check_topics(T)
        names, background = setup.topic_structure(T, self.background_topics, self.topic_names)
        reg = self.regularizer()
        for t in reg.terms:
            if t.per_document:
                raise ValueError(f"regularizer {t.name!r} holds data about particular documents; partial_fit sees "
                                 "batches, not documents by index")
        if not (fitted and self._online_continues()):  # before a state is allocated
            refuse_online_topics(T, W, max(8, _pow2(corpus.n_docs)))
        data, n_docs = batch_layout(corpus)
        ctx = Context(n_words=W, n_topics=T, n_docs=n_docs, topic_names=names, background=background)
        reg = reg.bind(ctx).resolve(int(self.max_iter)).cast(jnp.float32)
        if reg.on_host:
            raise ValueError("partial_fit does not support schedules of the score history")
        if fitted and self._online_continues():
            state, earlier = self.online_state_, list(self.history_)
        else:
            if fitted:  # a model fitted by fit() or loaded: start from its Φ as positive pseudo-counts
                state = online.online_init(None, W, T, reg=reg, phi=self.phi_)
            else:
                state = online.online_init(as_key(self._seed()), W, T, reg=reg)
            reg.check(state.phi, jnp.full((T, n_docs), 1.0 / T, state.phi.dtype), state.params)
            earlier = []  # a new online fit: its history starts here (written with the rest, if the update succeeds)
        t0 = time.perf_counter()
        new = _step(state, data, reg, jnp.asarray(True), static, n_docs)
        phi = np.asarray(new.phi)
        loglik = float(new.loglik)
        it = int(state.updates) + 1
        if not (np.all(np.isfinite(phi)) and np.isfinite(loglik)):
            coefs = {t.name: float(t.coef(it)) for t in reg.terms}
            raise NumericalError(f"{type(self).__name__}.partial_fit: update {it} produced non-finite values "
                                 f"(regularizers and coefficients: {coefs or 'none'}); the model is unchanged",
                                 iteration=it, reason="nonfinite", state=state)
        rho = float(np.power(static.tau0 + float(state.updates), -static.kappa))
        if not (phi.sum(0) > 0).any():
            coefs = {t.name: float(t.coef(it)) for t in reg.terms}
            raise NumericalError(f"{type(self).__name__}.partial_fit: update {it} removed every topic (regularizers and "
                                 f"coefficients: {coefs or 'none'}; the batch's counts enter with weight rho = {rho:.3g}, "
                                 "(learning_offset + updates)^-learning_decay, against full-strength regularizers: a "
                                 "smaller learning_offset or coefficient keeps topics); the model is unchanged",
                                 iteration=it, reason="collapse", state=state)
        before = self.empty_topics_ if fitted else []
        self._take_online_state(new, reg, names, background, earlier + [{
            "iteration": it, "objective": loglik, "perplexity": float(np.exp(-loglik / corpus.n_tokens)),
            "rho": rho, "seconds": time.perf_counter() - t0}])
        self._warn_empty_topics([], before, where=f"{type(self).__name__}.partial_fit (update {it})")
        return self

    @classmethod
    def _from_online_state(cls, state: online.OnlineState, reg, *, vocab, history: list, seed=None, **params):
        """A fitted estimator holding the result of an online fit: ``state`` (its Φ, counts and
        update count), ``reg`` (the regularizer it ran with, bound and resolved), the vocabulary
        of its corpus, its ``history`` and ``seed`` (``seed_``: the seed of its initial Φ, None when
        not known); ``params`` are the constructor's (``n_components`` is Φ's width).  It
        transforms, saves, reopens and continues with ``partial_fit`` like a model fitted batch by
        batch."""
        model = cls(int(state.phi.shape[1]), **params)
        model.seed_ = seed
        model.vocab_ = list(vocab)
        model.n_features_in_ = len(model.vocab_)
        names, background = setup.topic_structure(int(state.phi.shape[1]), model.background_topics, model.topic_names)
        model._take_online_state(state, reg, names, background, history)
        return model

    def _take_online_state(self, state: online.OnlineState, reg, names, background, history: list) -> None:
        """The fitted attributes of an online fit from its state, written by the estimator's one
        ``_set_fitted``: no Θ (``theta_``, ``doc_alive_`` None), one modality, no classes, the
        coefficients of update ``state.updates``, the state kept to continue from."""
        phi = np.asarray(state.phi)
        st = setup.Structure(None, tuple(names), tuple(background), np.zeros(phi.shape[0], np.int32), ("words",),
                         np.ones(1))
        it = int(state.updates)
        self._set_fitted(st, phi=phi, psi=None, theta=None, topic_alive=(phi.sum(0) > 0).astype(np.float32),
                         doc_alive=None, history=list(history), final_taus=[float(t.coef(it)) for t in reg.terms],
                         reg=reg, params=state.params, online_state=state, n_batch_iter=it)
