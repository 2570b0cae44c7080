"""Online PLSA/ARTM over corpora larger than memory (BigARTM's ``fit_online``).

:func:`fit_online` runs the online algorithm of :mod:`topicjax.artm.online` over an on-disk batch
store (:mod:`topicjax.scale.store`; written from files by the streaming converters of
:mod:`topicjax.scale.convert`, or from in-memory corpora by :func:`write_store`), one batch per
iteration of the driver of :mod:`topicjax.core.driver` (progress, history, non-finite and collapse
checks), and returns the fitted :class:`~topicjax.artm.ARTM`.  :func:`infer_theta` gives Θ of a
store's documents batch by batch.  Every batch is padded to one shape, so the per-batch step
compiles once.

With ``mesh=`` (:func:`topicjax.scale.distributed.make_mesh`; devices of one or several
processes) every batch's documents are split over the devices as
:func:`topicjax.core.sharding.shard` splits a corpus: each process reads from the store only its
devices' shares of the batch, the batch's counts are the devices' partial counts added with
``psum``, and every process applies the same update (the one-process model up to round-off; see
:mod:`topicjax.scale.distributed`).

The store's, the converters' and the algorithm's names can also be imported from here, where
the first releases had them (``online.write_store``, ``online.convert_uci``, ``online.OnlineState``...).

>>> import tempfile, topicjax as tj
>>> from topicjax.scale import online
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=300, seed=0)
>>> store = online.write_store([corpus], tempfile.mkdtemp(), batch_size=100)
>>> store.n_docs, store.n_batches
(300, 3)
>>> model = online.fit_online(store, n_components=10, passes=2, progress=False)
>>> model.phi_.shape, len(model.history_), model.n_batch_iter_
((25, 10), 6, 6)
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from topicjax.artm import ARTM
from topicjax.artm import algorithm as em
from topicjax.core import driver, layout
from topicjax.core.sharding import RangeCorpus, chunks_per_device, host_array, replicate, shard
from topicjax.artm.online import ONLINE_EM, OnlineState, OnlineStatic, batch_step, online_init  # noqa: F401
from topicjax.core.random import as_key, check_random_state, fresh_seed
from topicjax.core.validation import check_bool, check_int, check_number, refuse_online_topics
from topicjax.regularizers import Context, as_regularizer
from topicjax.regularizers.base import check_regularizers
from topicjax.scale.convert import convert_uci, convert_vw  # noqa: F401 - the import path of the first releases
from topicjax.scale.store import Batch, BatchStore, write_store  # noqa: F401 - idem
from topicjax.core.compiled import jit

__all__ = ["fit_online", "infer_theta"]


def _batch_data(batch: Batch, n_docs: int, n_chunks: int, k: int, dtype) -> layout.DocWordCounts:
    """A batch in the sliced layout with ``n_docs`` Θ columns and exactly ``n_chunks`` chunks."""
    off = batch.offsets
    if batch.n_docs < n_docs:  # the last batch: empty documents fill the fixed Θ shape
        off = np.concatenate([off, np.full(n_docs - batch.n_docs, off[-1])])
    arrays = layout.sliced_layout(off, batch.words, batch.counts, layout.PIECE, k, n_chunks, dtype=dtype)
    return layout.DocWordCounts(*(jnp.asarray(a) for a in arrays))


def _batch_offsets(offsets: np.ndarray, store: BatchStore, i: int, n_docs: int) -> np.ndarray:
    """Offsets (from 0) of batch ``i``'s documents in the store's ``offsets``, with empty documents
    after the last batch's to fill the fixed Θ shape of ``n_docs`` columns."""
    first = i * store.batch_size
    last = min(store.n_docs, first + store.batch_size)
    off = offsets[first:last + 1] - offsets[first]
    return np.concatenate([off, np.full(n_docs - (last - first), off[-1])])


def _batch_source(offsets: np.ndarray, store: BatchStore, i: int, n_docs: int) -> RangeCorpus:
    """Batch ``i`` as a :class:`~topicjax.core.sharding.RangeCorpus`: :func:`shard` reads the
    entries of the calling process's devices' shares of it, and nothing else."""
    first = i * store.batch_size
    real = min(store.n_docs, first + store.batch_size) - first

    def read(a: int, b: int):
        batch = store.documents(first + min(a, real), first + min(b, real))
        return batch.words, batch.counts

    return RangeCorpus(_batch_offsets(offsets, store, i, n_docs), read, source=f"{store.folder} batch {i}")


@jit
def _tokens(count):
    """The tokens of a (sharded) batch: its integer counts added up (an all-reduce over the mesh)."""
    return jnp.sum(jnp.round(count).astype(jnp.int32))


class _Prefetch:
    """Loads batches in a background thread one step ahead: while the device computes on batch
    ``i``, batch ``i + 1`` is read from disk and laid out (file reads and numpy's large copies
    release the GIL), so the cores do not wait on the disk between batches.  ``get(i)`` returns
    ``load(i)``, whatever was prefetched; at most one batch is held beyond the one in use."""

    def __init__(self, load, n: int):
        self.load, self.n = load, n
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="topicjax-prefetch")
        self.ahead: tuple[int, Future] | None = None

    def get(self, i: int, last: bool = False):
        """Batch ``i``; unless it is the ``last`` one wanted, batch ``i + 1`` (cyclically) starts
        loading in the background."""
        if self.ahead is not None and self.ahead[0] == i:
            out = self.ahead[1].result()
        else:
            out = self.load(i)
        self.ahead = None
        if not last:
            j = (i + 1) % self.n
            self.ahead = (j, self.pool.submit(self.load, j))
        return out

    def close(self):
        self.ahead = None
        self.pool.shutdown(wait=True, cancel_futures=True)


class SlowStartWarning(UserWarning):
    """A fit_online whose step size hardly changes over the fit: ``learning_offset`` (τ0) is far
    above the number of updates it makes, so Φ keeps the counts of its first batches, taken at
    the random start, about as much as the last ones."""


def _warn_slow_start(n_iterations: int, update_every: int, tau0: float, kappa: float, earlier: int) -> None:
    """Warn (:class:`SlowStartWarning`) when the step counter ``t`` of ``ρ = (τ0 + t)^(-κ)`` ends
    below ``τ0 / 10`` (``earlier`` updates of a resumed state count): ρ then varies by less than
    a factor ``1.1^κ`` over the fit, so ``n_wt`` is close to a plain average of every batch's
    counts, the first ones taken under the random initial Φ (with BigARTM's τ0 = 1024 on a
    10-batch store of the bars, the online fit recovers the bars at a Hellinger distance of
    0.42-0.48 against the offline fit's 0.22; with ``learning_offset=1`` it recovers them)."""
    updates = -(-n_iterations // update_every)  # an update every update_every batches, and at the end
    if kappa == 0.0 or 10 * (earlier + updates) >= tau0:
        return
    import warnings

    most = (earlier + updates) // 10
    warnings.warn(f"fit_online makes {updates} updates of Φ, far fewer than learning_offset={tau0:g} (τ0): "
                  f"the step size ρ = (τ0 + t)^-κ stays near {(tau0 + earlier) ** -kappa:.2g}, so Φ averages "
                  f"in the counts of the first batches, taken at the random start; for a store of few batches "
                  f"pass learning_offset=1{f' (or at most {most})' if most > 1 else ''}: ρ starts at 1 and "
                  f"the first batch replaces the random start", SlowStartWarning, stacklevel=3)


def fit_online(store: BatchStore | str | os.PathLike, n_components: int, *, passes: int = 1, update_every: int = 1,
               learning_offset: float = 1024.0, learning_decay: float = 0.7, doc_passes: int = 10,
               regularizers=None,
               random_state=0, state: OnlineState | None = None, progress: bool = True, mesh: Mesh | None = None):
    """Online PLSA/ARTM over a batch store (BigARTM's ``fit_online``; see the module docstring).

    ``passes`` (>= 1) sweeps over the store, batches in order; the step size counter continues
    across passes.  ``regularizers``: anything :func:`topicjax.regularizers.as_regularizer` accepts (bound
    to the batch's shape: regularizers with data about particular documents, or that need corpus
    statistics, are refused with a clear error).  ``state`` resumes a previous fit (the
    ``online_state_`` of the model it returned).  ``learning_offset`` (τ0, >= 1, so that ρ <= 1)
    and ``learning_decay`` (κ, in [0, 1]) give the step size ``ρ = (τ0 + t)^(-κ)`` (BigARTM's
    ``tau0`` and ``kappa``; the names of ARTM's parameters and of scikit-learn).

    Returns the fitted :class:`~topicjax.artm.ARTM` (built by
    :meth:`~topicjax.artm.ARTM._from_online_state`, as ``partial_fit`` builds it): ``phi_``,
    ``components_``, ``vocab_`` (the store's), ``online_state_``, ``n_batch_iter_`` (updates
    applied), what ``transform``, ``save`` and ``partial_fit`` need, and ``history_``, one
    record per batch: ``pass``, ``batch``, ``objective`` (log-likelihood of the batch under the Φ *before* the batch's update, with the
    batch's own Θ), ``perplexity`` and ``rho`` of the update when one was applied.  In the first
    pass that is a progressive-validation score: words that no earlier batch contained have φ = 0
    there, which makes it large (Φ is plain PLSA unless a smoothing regularizer is given).

    With one batch holding every document, ``learning_decay=0`` (ρ = 1) and ``update_every=1``, each pass
    is the offline pass of ``ARTM(doc_passes=doc_passes)``: the same model up to round-off.

    Warns (:class:`SlowStartWarning`) when the fit makes fewer than ``learning_offset / 10``
    updates: ρ then hardly moves, and Φ keeps the counts of its first batches, taken at the
    random start (BigARTM's τ0 = 1024 suits thousands of batches; a store of tens wants
    ``learning_offset=1``).

    ``mesh``: split every batch's documents over the devices of a mesh (of one or several
    processes; each process reads only its devices' shares of each batch, the counts are added
    with ``psum``): the same model as without, up to round-off, in every process.
    """
    store = store if isinstance(store, BatchStore) else BatchStore(store)
    check_int(n_components, "n_components", 1)
    check_int(update_every, "update_every", 1)
    check_int(doc_passes, "doc_passes", 1)
    # passes=0 would return the random initial Φ as a fitted model; resuming a state for no pass
    # is ARTM._from_online_state(state, ...) itself
    check_int(passes, "passes", 1)
    check_number(learning_decay, "learning_decay", 0.0, 1.0)
    check_number(learning_offset, "learning_offset", 1.0)
    check_random_state(random_state)
    check_bool(progress, "progress")
    if state is not None and not isinstance(state, OnlineState):
        raise ValueError(f"state must be None or an OnlineState of a previous fit, got {type(state).__name__}")
    _warn_slow_start(passes * store.n_batches, update_every, learning_offset, learning_decay,
                     0 if state is None else int(state.updates))
    reg = as_regularizer(check_regularizers(regularizers))
    for t in reg.terms:
        if t.per_document:
            raise ValueError(f"regularizer {t.name!r} holds data about particular documents; the online fit sees "
                             "batches, not documents by index")
    k = layout.DEFAULT_CHUNK // layout.PIECE
    n_docs = min(store.batch_size, store.n_docs)
    if state is None:  # before the state is allocated (a state given is already there)
        refuse_online_topics(n_components, store.n_words, n_docs)
    if mesh is None:
        n_chunks = max(1, -(-store.max_pieces() // k))
    else:  # one sharded shape for every batch: the most chunks a device needs in any batch
        offsets = store.doc_offsets()
        n_dev = int(mesh.devices.size)
        n_chunks = max(chunks_per_device(_batch_offsets(offsets, store, i, n_docs), n_dev, layout.DEFAULT_CHUNK)
                       for i in range(store.n_batches))
    ctx = Context(n_words=store.n_words, n_topics=int(n_components), n_docs=n_docs)
    reg = reg.bind(ctx).resolve(max(passes * store.n_batches, 1)).cast(jnp.float32)
    if reg.on_host:
        raise ValueError("the online fit does not support schedules of the score history")
    seed = None  # of the initial Φ: unknown when a state is resumed
    if state is None:
        seed = check_random_state(random_state)
        seed = fresh_seed() if seed is None else seed  # kept in the model's seed_, as fit keeps it
        state = online_init(as_key(seed), store.n_words, int(n_components), reg=reg)
    if state.phi.shape != (store.n_words, n_components):
        raise ValueError(f"the state's Φ is {state.phi.shape}, the store needs ({store.n_words}, {n_components})")
    reg.check(state.phi, jnp.full((int(n_components), n_docs), 1.0 / n_components, state.phi.dtype), state.params)
    total = passes * store.n_batches
    static = (OnlineStatic(int(doc_passes), float(learning_decay), float(learning_offset)), int(n_docs))
    meta = []  # (pass, batch, tokens, rho) of each iteration, for the history
    earlier = int(state.updates)  # updates of the fit that ``state`` resumes: ρ's counter goes on

    if mesh is not None:
        state, reg = replicate(mesh, state), replicate(mesh, reg)

    def load(i):
        if mesh is not None:  # host work and placement only: the collectives stay in the main thread
            return None, shard(_batch_source(offsets, store, i, n_docs), mesh, chunk=layout.DEFAULT_CHUNK,
                               n_chunks=n_chunks)
        batch = store.batch(i)
        return int(batch.counts.sum()), _batch_data(batch, n_docs, n_chunks, k, np.float32)

    prefetch = _Prefetch(load, store.n_batches)

    def before(iteration, history):
        p, i = divmod(iteration - 1, store.n_batches)
        n_tok, data = prefetch.get(i, last=iteration == total)
        if n_tok is None:
            n_tok = int(host_array(_tokens(data.count)))
        apply = (iteration % update_every == 0) or (iteration == total)
        updates = earlier + sum(1 for m in meta if m[3] is not None)
        meta.append((p + 1, i, n_tok, float(np.power(learning_offset + updates, -learning_decay)) if apply else None))
        if p == 0 and i == store.n_batches - 1 and mesh is None:  # the first whole pass against meta.json
            store.check_tokens(sum(m[2] for m in meta))
        return data, reg, jnp.asarray(apply), None

    def postfix(history):
        # tokens per second over the batches so far (the bar's own rate and ETA count batches)
        seconds = sum(r["seconds"] for r in history)
        tokens = sum(m[2] for m in meta[:len(history)])
        return {"tokens/s": f"{tokens / max(seconds, 1e-9):.3g}", "perplexity":
                f"{np.exp(-history[-1]['objective'] / max(meta[len(history) - 1][2], 1)):.5g}"}

    try:
        state, records = driver.run(ONLINE_EM, static, state, None, max_iter=total,
                                    progress=progress and jax.process_index() == 0,  # one bar per run
                                    desc="online EM", before=before, postfix=postfix)
    finally:
        prefetch.close()
    if mesh is not None:  # the replicated state as this process's arrays (what a one-process fit returns)
        state = jax.tree.map(lambda x: jnp.asarray(host_array(x)) if isinstance(x, jax.Array) and not
                             x.is_fully_addressable else x, state)
    history = []
    for r, (p, i, n_tok, rho) in zip(records, meta):
        rec = {"iteration": r["iteration"], "pass": p, "batch": i, "objective": r["objective"],
               "perplexity": float(np.exp(-r["objective"] / n_tok)) if n_tok else float("nan"),
               "seconds": r["seconds"]}
        if rho is not None:
            rec["rho"] = rho
        history.append(rec)
    model = ARTM._from_online_state(state, reg, vocab=store.vocab(), history=history, seed=seed,
                                    regularizers=regularizers, max_iter=total, random_state=random_state,
                                    doc_passes=int(doc_passes), learning_offset=float(learning_offset),
                                    learning_decay=float(learning_decay), progress=progress)
    model._warn_empty_topics(history, where="fit_online", stacklevel=3)
    return model


def infer_theta(store: BatchStore | str | os.PathLike, phi, *, n_iter: int = 30,
                regularizers=None) -> Iterator[tuple[int, np.ndarray]]:
    """Θ of the store's documents with Φ fixed, batch by batch: yields ``(first_doc, theta (T, n))``."""
    store = store if isinstance(store, BatchStore) else BatchStore(store)
    check_int(n_iter, "n_iter", 1)  # 0 would give the uniform start as the documents' Θ
    phi = jnp.asarray(phi, jnp.float32)
    for batch in store:
        data = layout.DocWordCounts(*(jnp.asarray(a) for a in layout.sliced_layout(
            batch.offsets, batch.words, batch.counts, layout.PIECE, layout.DEFAULT_CHUNK // layout.PIECE)))
        ctx = Context(n_words=phi.shape[0], n_topics=phi.shape[1], n_docs=batch.n_docs, phase="transform")
        reg = as_regularizer(regularizers).bind(ctx).cast(jnp.float32)
        theta = em.infer_theta(phi, data, batch.n_docs, reg, n_iter=n_iter)
        yield batch.first, np.asarray(theta)
