"""Offline PLSA/ARTM EM streamed from an on-disk batch store (BigARTM's ``fit_offline``).

:func:`fit_store` is the EM iteration of :meth:`ARTM.fit <topicjax.artm.ARTM.fit>` with the corpus
on disk (:class:`~topicjax.scale.store.BatchStore`): Θ (T x D) and Φ (W x T) stay in memory, the
non-zeros are read one batch at a time (the next batch is read in the background,
:class:`topicjax.scale.online._Prefetch`; every batch padded to one shape,
:func:`topicjax.scale.online._batch_data`, so the per-batch step compiles once).  Iteration ``i``:

1. for every batch ``b`` of documents ``d ∈ b`` (Φ fixed):

   * with ``doc_passes = k >= 1`` (BigARTM's ``num_document_passes``): Θ_b restarts from uniform
     and takes ``k`` iterations of ARTM eq. 16, ``θ_td ∝ (n_td + θ_td ∂R/∂θ_td)₊``, with the Θ
     terms of R evaluated on the batch's columns (:func:`topicjax.core.foldin.theta_passes`); with
     ``doc_passes=None`` Θ_b is the batch's columns of the last iteration's Θ (plain EM);
   * one E-step at (Φ, Θ_b) (:func:`topicjax.core.estep.expected_counts`) adds the batch's
     ``∂L_b/∂φ_wt`` to the pass's total and writes ``∂L_b/∂θ_td`` into Θ's columns of the batch
     (``n_wt = φ_wt Σ_b ∂L_b/∂φ_wt``, ``n_td = θ_td ∂L/∂θ_td``, eq. 7-8), and ``L = Σ_b L_b``
     (eq. 4);

2. then the M-step of ARTM.fit, :func:`topicjax.artm.algorithm.step` itself (eq. 14-16 with
   ``jax.grad`` of the regularizers, the removal of over-regularized topics and documents of
   Notes 1-2, the regularizers' ``update``), with the counts of step 1 in place of the E-step
   over the corpus: ``φ_wt ∝ (n_wt + φ_wt ∂R/∂φ_wt)₊``, ``θ_td ∝ (n_td + θ_td ∂R/∂θ_td)₊``.

So a fit equals ``ARTM(n_components, doc_passes=..., regularizers=...,
random_state=...).fit(store.corpus())`` up to float round-off (the same initial Φ for the same
``random_state``; tested), while its memory is Φ, Θ, the counts (W x T, T x D) and one batch
(plus the one prefetched): nothing of the size of the corpus.  The M-step is global, so with
``doc_passes=None`` every regularizer that binds without the corpus in memory is exact; with
``doc_passes >= 1`` the inner Θ passes see one batch, as in BigARTM, which is exact for
regularizers whose Θ terms are sums over documents (smoothing, sparsing) and refused for those
with per-document data or data re-estimated during the fit.  Regularizers that need the corpus
itself (word counts, co-occurrences) are refused with an error naming them; ``doc_lengths`` are
read from the store.

>>> import tempfile, topicjax as tj
>>> from topicjax.scale import offline, store
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=300, seed=0)
>>> st = store.write_store([corpus], tempfile.mkdtemp(), batch_size=100)
>>> model = offline.fit_store(st, 10, max_iter=3, progress=False)
>>> model.phi_.shape, model.theta_.shape, len(model.history_)
((25, 10), (10, 300), 3)
>>> model.history_[-1]["objective"] > model.history_[0]["objective"]
True
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.artm import ARTM
from topicjax.artm import setup
from topicjax.artm import algorithm as em
from topicjax.core import driver, estep, layout, mstep
from topicjax.core.random import as_key, check_random_state, fresh_seed
from topicjax.core.validation import check_bool, check_int
from topicjax.regularizers import Context, as_regularizer
from topicjax.regularizers.base import check_regularizers
from topicjax.scale.online import _batch_data, _Prefetch
from topicjax.scale.store import Batch, BatchStore
from topicjax.core.compiled import jit

__all__ = ["fit_store"]


class _PassCounts(NamedTuple):
    """The counts of one pass over the store as a layout that brings its own E-step
    (:func:`topicjax.core.estep.expected_counts`): :func:`topicjax.artm.algorithm.step` then applies its
    M-step to them.  ``doc`` and ``count`` are placeholders for the reweighting of removed
    documents (:func:`topicjax.core.layout.reweight_docs`), already applied batch by batch."""

    ll: jax.Array
    g_phi: jax.Array
    g_theta: jax.Array
    doc: jax.Array
    count: jax.Array
    piece_doc: None = None

    def expected_counts(self, phi, theta, *, need_phi=True, need_theta=True):
        return self.ll, (self.g_phi if need_phi else None), (self.g_theta if need_theta else None)


def _cols(a, start, n):
    return jax.lax.dynamic_slice_in_dim(a, start, n, axis=a.ndim - 1)


@functools.partial(jit, static_argnames=("doc_passes", "remove"), donate_argnames=("g_phi", "g_theta", "theta"))
def _batch_pass(phi, theta, g_phi, g_theta, data, start, real, alive_t, alive_d, reg_b, it, doc_passes, remove):
    """Step 1 of the module docstring for one batch (columns ``start .. start + n`` of Θ, of
    which those where ``real`` are the batch's documents): ``(ll, g_phi, g_theta, theta)``."""
    n = real.shape[0]
    ad = _cols(alive_d, start, n) * real.astype(alive_d.dtype)
    if remove:  # removed documents (ARTM Note 2) contribute no counts
        data = layout.reweight_docs(data, ad)
    th = _cols(theta, start, n)
    if doc_passes:
        T = phi.shape[1]
        penalty, keep = em.penalties(reg_b, reg_b.params, it)
        th = jnp.broadcast_to((alive_t / alive_t.sum())[:, None], (T, n)).astype(phi.dtype)

        def mask(x):  # removed topics and documents stay out (em.step's masking)
            return mstep.normalize_columns(x * alive_t[:, None]) * ad[None, :]

        th = em.theta_passes(phi, th, data, penalty, keep, doc_passes, mask)
        theta = jax.lax.dynamic_update_slice_in_dim(theta, jnp.where(real[None, :], th, _cols(theta, start, n)),
                                                    start, axis=1)
    ll, gp, gt = estep.expected_counts(phi, th, data)
    g_theta = jax.lax.dynamic_update_slice_in_dim(g_theta, jnp.where(real[None, :], gt, _cols(g_theta, start, n)),
                                                  start, axis=1)
    return ll, g_phi + gp, g_theta, theta


@functools.partial(jit, static_argnames=("cfg",), donate_argnames=("state",))
def _m_step(state, counts, reg, aux, cfg):
    return em.step(state, counts, reg, aux, cfg)


def _bind(regularizers, ctx: Context, max_iter: int, who: str):
    try:
        return as_regularizer(regularizers).bind(ctx).resolve(max(max_iter, 1)).cast(jnp.float32)
    except ValueError as e:
        raise ValueError(f"fit_store: {e} ({who}: the fit of a batch store has the store's doc_lengths but not "
                         "the corpus in memory; regularizers that need the corpus as a whole are not supported)") from None


def _doc_lengths(store: BatchStore) -> np.ndarray:
    out = np.zeros(store.n_docs, np.float64)
    for b in store:
        doc = np.repeat(np.arange(b.n_docs), np.diff(b.offsets))
        out[b.first:b.first + b.n_docs] = np.bincount(doc, weights=b.counts, minlength=b.n_docs)
    return out


def fit_store(store: BatchStore | str | os.PathLike, n_components: int, *, max_iter: int = 40, regularizers=None,
              doc_passes: int | None = None, overregularized: str = "remove", random_state=0, phi=None,
              progress: bool = True) -> ARTM:
    """Offline PLSA/ARTM over a batch store, streamed one batch at a time (see the module docstring).

    Each iteration is one pass over the store and one EM iteration of ``ARTM(n_components,
    regularizers=regularizers, doc_passes=doc_passes, overregularized=overregularized,
    random_state=random_state, max_iter=max_iter)``: the same model up to round-off.  ``phi``
    (W x T) replaces the random initial Φ.  The iterations run through
    :func:`topicjax.core.driver.run_host` (progress bar, history, and
    :class:`~topicjax.core.errors.NumericalError` on a non-finite value or a collapse).

    Returns a fitted :class:`~topicjax.artm.ARTM` (its attributes set by the same code as
    :meth:`~topicjax.artm.ARTM.fit`'s): ``phi_``, ``theta_`` (T x D), ``vocab_`` (the store's),
    ``history_`` with one record per iteration: ``objective`` (L of the parameters before the
    iteration, eq. 4), ``regularizer``, ``tau/<name>``, ``perplexity``, the
    ``overregularized_topics``/``_docs`` and ``seconds``.
    """
    store = store if isinstance(store, BatchStore) else BatchStore(store)
    check_int(n_components, "n_components", 1)
    check_int(max_iter, "max_iter", 1)  # 0 would return the random initial Φ as fitted
    if doc_passes is not None:
        check_int(doc_passes, "doc_passes", 1)
    if overregularized not in ("remove", "keep"):
        raise ValueError(f"overregularized must be 'remove' or 'keep', got {overregularized!r}")
    check_random_state(random_state)
    check_bool(progress, "progress")
    T, W, D = int(n_components), store.n_words, store.n_docs
    k = int(doc_passes or 0)
    lengths = _doc_lengths(store)
    if np.any(lengths <= 0):
        raise ValueError(f"{store.folder}: document {int(np.flatnonzero(lengths <= 0)[0])} is empty (ARTM.fit of "
                         "store.corpus() refuses empty documents too)")
    check_regularizers(regularizers)
    model = ARTM(T, regularizers=regularizers, max_iter=max_iter, random_state=random_state,
                 doc_passes=doc_passes, overregularized=overregularized, progress=progress)
    reg = _bind(regularizers, Context(n_words=W, n_topics=T, n_docs=D, doc_lengths=lengths), max_iter, "corpus")
    if reg.on_host:
        raise ValueError("fit_store: schedules of the score history are not supported")
    n_docs = min(store.batch_size, D)
    reg_b = None
    if k:
        for t in reg.terms:
            if t.uses_theta and (t.per_document or t.update is not None):
                raise ValueError(f"fit_store: regularizer {t.name!r} has per-document data or data re-estimated "
                                 "during the fit; with doc_passes the Θ passes see one batch (use doc_passes=None)")
        reg_b = _bind(regularizers, Context(n_words=W, n_topics=T, n_docs=n_docs), max_iter, "batch")
    seed = check_random_state(random_state)
    model.seed_ = seed = fresh_seed() if seed is None else seed
    state = em.init(as_key(seed), W, D, T, reg=reg)
    if phi is not None:
        phi = jnp.asarray(phi, jnp.float32)
        if phi.shape != (W, T):
            raise ValueError(f"phi is {phi.shape}, the store needs ({W}, {T})")
        state = state._replace(phi=phi)
    reg.check(state.phi, state.theta)
    cfg = em.EMConfig(remove=overregularized == "remove", doc_passes=0)
    aux = em.EMAux(None, None, jnp.zeros(T, bool))
    kp = layout.DEFAULT_CHUNK // layout.PIECE
    n_chunks = max(1, -(-store.max_pieces() // kp))

    def load(i):
        b = store.batch(i)
        pad = n_docs - b.n_docs  # the last batch ends at column D: empty documents in front
        if pad:
            b = Batch(b.first - pad, np.concatenate([np.zeros(pad, b.offsets.dtype), b.offsets]), b.words, b.counts)
        real = jnp.asarray(np.arange(n_docs) >= pad)
        return int(b.first), real, _batch_data(b, n_docs, n_chunks, kp, np.float32)

    n_tokens = float(lengths.sum())
    names = [t.name for t in reg.terms]

    def step(s, iteration):
        it = jnp.asarray(iteration, jnp.int32)
        g_phi, g_theta = jnp.zeros_like(s.phi), jnp.zeros_like(s.theta)
        theta = s.theta
        lls = []
        prefetch = _Prefetch(load, store.n_batches)
        try:
            for i in range(store.n_batches):
                first, real, data = prefetch.get(i, last=i == store.n_batches - 1)
                l_b, g_phi, g_theta, theta = _batch_pass(s.phi, theta, g_phi, g_theta, data, jnp.int32(first), real,
                                                         s.topic_alive, s.doc_alive, reg_b, it, k, cfg.remove)
                # waited for: else the loop runs ahead of the device, and batches queued for it add to
                # the one computing and the one read in the background
                lls.append(l_b.block_until_ready())
                del data
        finally:
            prefetch.close()
        ll = float(np.sum(np.asarray(jax.device_get(lls), np.float64)))
        counts = _PassCounts(jnp.float32(ll), g_phi, g_theta, jnp.zeros((), jnp.int32), jnp.ones((), jnp.float32))
        new = _m_step(s._replace(theta=theta, iteration=it - 1), counts, reg, aux, cfg)
        rec = {"objective": float(new.loglik), "regularizer": float(new.reg)}
        for name, t in zip(names, reg.terms):
            rec[f"tau/{name}"] = float(t.coef(it))
        rec["perplexity"] = float(np.exp(-rec["objective"] / n_tokens))
        rec["overregularized_topics"] = [f"topic_{j}" for j in np.flatnonzero(np.asarray(new.dead_topics))]
        rec["overregularized_docs"] = int(np.asarray(new.dead_docs).sum())
        return new, rec

    def health(s):  # a NaN names what failed: run_host then raises NumericalError
        finite, present = em.health(s)
        return {"finite values": 1.0 if bool(finite) else float("nan"),
                "topics and documents left (ARTM Notes 1-2)": 1.0 if bool(present) else float("nan")}

    state, history = driver.run_host(step, state, max_iter=max_iter, progress=progress, desc="offline EM (store)",
                                     health=health)
    st = setup.Structure(corpus=_Sizes(W, D), names=tuple(f"topic_{j}" for j in range(T)), background=(),
                     row_mod=np.zeros(W, np.int32), mod_names=("words",), weights=np.ones(1))
    model.vocab_ = list(store.vocab())
    model.n_features_in_ = W
    model._fitted_from_em(st, state, history)
    return model


class _Sizes(NamedTuple):
    """What :meth:`ARTM._fitted_from_em` reads of a corpus: its sizes."""

    n_words: int
    n_docs: int
