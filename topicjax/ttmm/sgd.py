"""Minibatch SGD for TTMM (eq. 12-15) with any optax optimiser on softmax logits, and one epoch
as an algorithm for the drivers of :mod:`topicjax.core.driver`.

An algorithm module in the shape every family's has: :data:`State` (:class:`SGDState`),
:func:`init` (:func:`sgd_init`), :func:`step` (:func:`epoch_step`, one epoch) and
:data:`ALGORITHM` (:data:`TTMM_SGD`: static ``(optimizer, n_docs)``, args ``(batches, data)``)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from topicjax.core import driver
from topicjax.data.corpus import Corpus
from topicjax.ttmm.em import converged_double, loglik_measure, loglik_value
from topicjax.ttmm.params import TTMMParams
from topicjax.ttmm.sweeps import doc_log_likelihood, safe_log
from topicjax.core import compiled

__all__ = ["Batch", "SGDState", "params_from_logits", "logits_from_params", "batch_loss", "sgd_init",
           "make_sgd_update", "sgd_update", "batch_capacity", "make_batches", "pad_batches", "pad_entries", "epoch_step", "TTMM_SGD",
           "State", "init", "step", "ALGORITHM"]


class Batch(NamedTuple):
    """A minibatch of whole documents with fixed shapes: ``doc`` (local index < B), ``word``,
    ``count`` (E entries, padding has count 0) and ``mask`` (B,), 1 for real documents."""

    doc: Int[Array, " E"]
    word: Int[Array, " E"]
    count: Float[Array, " E"]
    mask: Float[Array, " B"]


class SGDState(NamedTuple):
    """State of TTMM SGD: the logits (a, b, c) of (π, τ, β) in a :class:`TTMMParams`, the optimiser
    state, the number of updates done, the first update (0-based) after which a parameter was
    non-finite (-1: none) and ``doc_loglik`` (log P(d) at the last evaluation on the whole corpus)."""

    logits: TTMMParams
    opt_state: Any
    step: Int[Array, ""]
    bad_step: Int[Array, ""]
    doc_loglik: Float[Array, " D"]


def params_from_logits(logits: TTMMParams) -> TTMMParams:
    """π = softmax(a), τ_j = softmax(b_j), β_k = softmax(c_k): the constraints of eq. 12 hold by construction."""
    a, b, c = logits
    return TTMMParams(jax.nn.softmax(a), jax.nn.softmax(b, axis=1), jax.nn.softmax(c, axis=1))


def logits_from_params(params: TTMMParams) -> TTMMParams:
    return TTMMParams(*(safe_log(x) for x in params))


def batch_loss(logits: TTMMParams, batch: Batch) -> Float[Array, ""]:
    """−Σ_{d ∈ batch} log P(d) / (tokens in the batch): the minibatch estimate of −L (eq. 4) per token.

    Its gradient with respect to the logits is eq. 13-15 (with the multiplier terms, see the module
    docstring), summed over the batch and divided by its number of tokens.
    """
    a, b, c = logits
    tau, beta = jax.nn.softmax(b, axis=1), jax.nn.softmax(c, axis=1)
    log_a = safe_log(tau @ beta).T  # (W, J)
    n_batch = batch.mask.shape[0]
    S = jnp.zeros((n_batch, a.shape[0]), log_a.dtype).at[batch.doc].add(batch.count[:, None] * log_a[batch.word])
    ll = jax.nn.logsumexp(jax.nn.log_softmax(a)[None, :] + S, axis=1)
    return -jnp.sum(ll * batch.mask) / jnp.maximum(batch.count.sum(), 1.0)


@compiled.jit(static_argnums=1)
def _start(params: TTMMParams, n_docs: int):
    """The logits of ``params`` and the counters of a new state, in one program (eagerly, each
    log and each constant compiled a program of its own at every fit)."""
    return (logits_from_params(params), jnp.zeros((), jnp.int32), jnp.full((), -1, jnp.int32),
            jnp.zeros((n_docs,), params.pi.dtype))


#: :func:`params_from_logits` compiled (a fit's last step: eagerly, its softmaxes compiled ten
#: small programs at every fit)
params_of_logits = compiled.jit(params_from_logits)


def sgd_init(params: TTMMParams, optimizer, n_docs: int) -> SGDState:
    """SGD state starting from probabilities ``params`` (logits = their logs).  ``optimizer.init``
    runs eagerly (outside any compiled program)."""
    logits, step, bad, doc_loglik = _start(params, int(n_docs))
    return SGDState(logits, optimizer.init(logits), step, bad, doc_loglik)


def sgd_update(state: SGDState, batch: Batch, optimizer):
    """One optax step on :func:`batch_loss`; ``(state, loss)``.  An empty batch (padding of an
    epoch to a fixed number of minibatches) changes nothing.  The update is applied even when it
    is not finite, but the first such step is recorded in ``state.bad_step``."""
    import optax

    nonempty = batch.mask.sum() > 0
    loss, grads = jax.value_and_grad(batch_loss)(state.logits, batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.logits)
    logits = optax.apply_updates(state.logits, updates)
    finite = jnp.isfinite(loss)
    for leaf in jax.tree.leaves(logits):
        finite &= jnp.all(jnp.isfinite(leaf))
    bad = jnp.where((state.bad_step < 0) & ~finite, state.step, state.bad_step)
    new = SGDState(logits, opt_state, state.step + 1, bad, state.doc_loglik)
    return jax.tree.map(lambda a, b: jnp.where(nonempty, a, b), new, state), loss


def make_sgd_update(optimizer, *, jit: bool = True):
    """``update(state, batch) -> (state, loss)``: :func:`sgd_update` with ``optimizer``."""

    def update(state: SGDState, batch: Batch):
        return sgd_update(state, batch, optimizer)

    return compiled.jit(update) if jit else update


def batch_capacity(corpus: Corpus, batch_size: int) -> int:
    """Entries per minibatch: room for the longest document and twice an average batch (multiple of 128)."""
    nz = np.diff(corpus.doc_offsets)
    cap = max(int(nz.max()), int(np.ceil(2 * min(batch_size, corpus.n_docs) * nz.mean())))
    cap = max(min(cap, corpus.nnz), int(nz.max()))
    return int(-(-cap // 128) * 128)


def make_batches(corpus: Corpus, order, batch_size: int, capacity: int) -> Batch:
    """Pack documents, in ``order``, into minibatches of at most ``batch_size`` documents and
    ``capacity`` entries (a batch closes early when the next document does not fit).

    Returns a :class:`Batch` of numpy arrays stacked along a leading batch axis; every batch has the
    same shapes, so one compiled update serves the whole fit.
    """
    off = corpus.doc_offsets
    nz = np.diff(off)
    order = np.asarray(order, np.int64)
    if nz.max() > capacity:
        raise ValueError(f"document {int(np.argmax(nz))} has {int(nz.max())} distinct words, more than the batch capacity {capacity}")
    groups: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for d in order.tolist():
        if cur and (len(cur) == batch_size or used + nz[d] > capacity):
            groups.append(cur)
            cur, used = [], 0
        cur.append(d)
        used += int(nz[d])
    if cur:
        groups.append(cur)
    n_b = len(groups)
    doc = np.zeros((n_b, capacity), np.int32)
    word = np.zeros((n_b, capacity), np.int32)
    count = np.zeros((n_b, capacity), np.float32)
    mask = np.zeros((n_b, batch_size), np.float32)
    for i, g in enumerate(groups):
        g = np.asarray(g)
        lens = nz[g]
        starts = np.repeat(off[g], lens)
        idx = starts + (np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
        m = idx.size
        doc[i, :m] = np.repeat(np.arange(g.size), lens)
        word[i, :m] = corpus.word_ids[idx]
        count[i, :m] = corpus.counts[idx]
        mask[i, : g.size] = 1.0
    return Batch(doc, word, count, mask)


def pad_batches(batches: Batch, n_batches: int) -> Batch:
    """Append empty minibatches up to ``n_batches`` (epochs of one shape compile once)."""
    extra = n_batches - batches.mask.shape[0]
    if extra <= 0:
        return batches
    return Batch(*(np.concatenate([x, np.zeros((extra,) + x.shape[1:], x.dtype)]) for x in batches))


def pad_entries(batches: Batch, capacity: int) -> Batch:
    """Append entries of count 0 (document 0, word 0) to every minibatch up to ``capacity``
    entries: they add nothing to :func:`batch_loss` or its gradient, and corpora whose
    capacities round to the same bucket share the compiled epoch."""
    extra = capacity - batches.count.shape[1]
    if extra <= 0:
        return batches
    pad = lambda x: np.concatenate([x, np.zeros((x.shape[0], extra), x.dtype)], axis=1)  # noqa: E731
    return batches._replace(doc=pad(batches.doc), word=pad(batches.word), count=pad(batches.count))


def epoch_step(state: SGDState, args, static) -> SGDState:
    """One epoch: :func:`sgd_update` over the epoch's minibatches (``args = (batches, data)`` or
    ``(batches, data, n_docs)``), then log P(d) of every document at the new parameters (the
    objective).  ``static = (optimizer, rows)``: ``rows`` per-document values; with ``n_docs``
    (traced) the rows from ``n_docs`` on are a bucket's padding (no token) and hold 0."""
    batches, data = args[:2]
    optimizer, rows = static
    state, _ = jax.lax.scan(lambda s, b: sgd_update(s, b, optimizer), state, batches)
    ll = doc_log_likelihood(params_from_logits(state.logits), data, rows)
    if len(args) > 2:
        ll = jnp.where(jnp.arange(rows) < args[2], ll, 0.0)
    return state._replace(doc_loglik=ll)


def _objective(state, args, static):
    return loglik_measure(state.doc_loglik)


def _health(state, static):
    finite = state.bad_step < 0
    for leaf in jax.tree.leaves(state.logits):
        finite &= jnp.all(jnp.isfinite(leaf))
    return finite, jnp.array(True)


#: One SGD epoch for the drivers: static ``(optimizer, rows)``, args ``(batches, data[, n_docs])``.
TTMM_SGD = driver.Algorithm(step=epoch_step, objective=_objective, record=_objective, health=_health,
                            converged=converged_double, value=loglik_value)


#: The state type (the name every family's algorithm module has): :class:`SGDState`.
State = SGDState
#: The initial state: :func:`sgd_init`.
init = sgd_init
#: One epoch: :func:`epoch_step`.
step = epoch_step
#: The :class:`~topicjax.core.driver.Algorithm` the driver runs: :data:`TTMM_SGD`.
ALGORITHM = TTMM_SGD
