"""ARTM's algorithm: the regularized EM state and step (PLSA, ARTM, BigARTM's offline pass, sharded fits).

The algorithm module of the ARTM family, in the shape every family's algorithm module has
(:class:`State`, :func:`init`, :func:`step` and :data:`ALGORITHM`, the
:class:`~topicjax.core.driver.Algorithm` that :func:`topicjax.core.driver.run` runs); it lives with
ARTM because its step takes a :class:`~topicjax.regularizers.Regularizer`.  Core provides the
regularizer-free pieces it is built of: the E-step (:mod:`topicjax.core.estep`), THE M-step
(:mod:`topicjax.core.mstep`) and the Θ passes with Φ fixed (:mod:`topicjax.core.foldin`).

One pure ``init(key, ...) -> EMState`` and ``step(state, data, reg, aux, cfg) -> EMState`` pair:

* the E-step is :func:`topicjax.core.estep.log_likelihood` over ``data`` (the local sliced layout,
  or a layout that brings its own E-step, such as the sharded one of
  :mod:`topicjax.scale.distributed`);
* the M-step is :func:`topicjax.core.mstep.m_step` (``normalize((x ⊙ ∇(L + R))₊)``, one
  ``jax.value_and_grad``) with ``reg`` a :class:`~topicjax.regularizers.Regularizer` whose
  coefficients are evaluated at the iteration (traced) and whose data comes from the state
  (``state.params``: regularizers may re-estimate it after every pass with their ``update``);
* over-regularized topics and documents (ARTM Notes 1-2): after each M-step a topic whose column
  is all zeros (or whose θ row is zero in every remaining document) and a document whose θ_d is
  all zeros are flagged (``dead_topics``, ``dead_docs``); with ``cfg.remove`` they are taken out
  of the model for the rest of the fit (masks ``topic_alive``, ``doc_alive``: shapes never
  change, nothing recompiles; a removed document's tokens no longer count);
* ``cfg.n_segments > 1``: one distribution per modality (block of rows of Φ, ``aux.segments``);
* a layout whose Θ is sharded over devices (:class:`~topicjax.core.sharding.ShardedCounts` with
  ``doc_block > 0``) pads Θ with columns that are no document (``doc_alive`` 0, θ = 0): the
  regularizers, their ``update`` and the device scores see Θ's document columns only
  (:func:`doc_columns`), so the model is the one-device model; :func:`place` starts a fit there;
* ``cfg.doc_passes = k >= 1``: BigARTM's offline pass (its ``num_document_passes``): Θ restarts
  from uniform, ``k`` iterations of eq. 16 with Φ fixed (half an E-step each), then the full
  regularized step at the final Θ (BigARTM's processor: ``k`` Θ updates, then n_wt).

:data:`ARTM_EM` (also :data:`ALGORITHM`) packages the step for the drivers of
:mod:`topicjax.core.driver` (stopping rule on the log-likelihood, per-iteration records on the
device, non-finite and collapse checks): ``args = (data, reg, aux)``, static :class:`EMStatic`.

>>> import jax, topicjax as tj
>>> from topicjax.artm import algorithm as em
>>> from topicjax.core import layout
>>> from topicjax.regularizers import as_regularizer
>>> corpus = tj.datasets.make_bars(n_docs=50, seed=0)[0]
>>> data = layout.prepare(corpus)
>>> reg = as_regularizer(None)
>>> state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10, reg=reg)
>>> state = jax.jit(em.step)(state, data, reg)
>>> bool(abs(state.phi.sum(0) - 1).max() < 1e-5)
True
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec
from jaxtyping import Array, Bool, Float, Int

from topicjax.core import compiled, estep, mstep, numerics
from topicjax.core.driver import Algorithm
from topicjax.core.foldin import theta_passes
from topicjax.core.layout import reweight_docs
from topicjax.core.sharding import host_array, replicate
from topicjax.regularizers import Context, as_regularizer

__all__ = ["EMConfig", "EMAux", "EMState", "EMStatic", "State", "init", "pad_topics", "place", "doc_columns", "step",
           "make_step", "infer_theta", "health", "penalties", "theta_passes", "ARTM_EM", "ALGORITHM"]


class EMConfig(NamedTuple):
    """Static settings of :func:`step` (hashable: part of the compiled program)."""

    update_phi: bool = True
    remove: bool = True
    mask_topics: bool = False
    n_segments: int = 1
    doc_passes: int = 0


class EMAux(NamedTuple):
    """Arrays of the model structure (traced): the modality of each row of Φ, which modalities
    count (weight > 0) and which topics are background topics."""

    segments: Int[Array, " W"] | None = None
    active: Bool[Array, " M"] | None = None
    background: Bool[Array, " T"] | None = None


class EMState(NamedTuple):
    """State of regularized EM.

    ``loglik`` is L(Φ, Θ) of the parameters *before* the last step (a by-product of its E-step,
    summed with compensation so that it is accurate to float64 level even in float32); ``reg``
    the regularizer's value Σ τ R at the same point; ``params`` the regularizers' data (one
    pytree per term); ``topic_alive``/``doc_alive`` the masks of topics and documents still in the
    model; ``dead_topics``/``dead_docs`` those the last M-step found over-regularized.
    """

    phi: Float[Array, "W T"]
    theta: Float[Array, "T D"]
    loglik: Float[Array, ""]
    reg: Float[Array, ""]
    iteration: Int[Array, ""]
    params: tuple
    topic_alive: Float[Array, " T"]
    doc_alive: Float[Array, " D"]
    dead_topics: Bool[Array, " T"]
    dead_docs: Bool[Array, " D"]
    finite: Bool[Array, ""] = True


#: The state type of the family's algorithm (the name every family's algorithm module has).
State = EMState


def init(key, n_words: int, n_docs: int, n_topics: int, *, reg=None, dtype=jnp.float32, aux: EMAux | None = None,
         n_segments: int = 1, real_words=None) -> EMState:
    """Random initial Φ (entries uniform in [0.05, 1], columns normalised, per modality with
    ``n_segments > 1``) and uniform Θ (BigARTM's default; random Φ breaks the topic symmetry).
    The result depends on ``key`` only (bits can differ between CPU and GPU).

    ``real_words`` (traced; one modality): the rows of Φ from ``real_words`` on are no word (a
    vocabulary rounded up to a bucket, :func:`topicjax.artm.setup.phi_rows`): zero, so that no
    step gives them mass.  The draw is made for every row, and JAX's counter-based generator draws
    each entry from its index, so the words' rows are the draw of ``init(key, real_words, ...)``."""
    phi = jax.random.uniform(key, (n_words, n_topics), dtype=dtype, minval=0.05, maxval=1.0)
    if real_words is not None:
        phi = jnp.where((jnp.arange(n_words) < real_words)[:, None], phi, jnp.zeros((), dtype))
    segments = None if aux is None else aux.segments
    phi = mstep.normalize_columns(phi, segments, n_segments)
    theta = jnp.full((n_topics, n_docs), 1.0 / n_topics, dtype=dtype)
    z = jnp.zeros((), dtype)
    params = () if reg is None else reg.params
    return EMState(phi, theta, z, z, jnp.zeros((), jnp.int32), params, jnp.ones(n_topics, dtype),
                   jnp.ones(n_docs, dtype), jnp.zeros(n_topics, bool), jnp.zeros(n_docs, bool), jnp.array(True))


def pad_topics(state: EMState, n_topics: int) -> EMState:
    """``state`` with masked topics appended up to ``n_topics`` (zero columns of Φ, zero rows of
    Θ, ``topic_alive`` 0): the model of ``state``'s own number of topics inside a larger shape,
    so that models with different numbers of topics share one compiled program."""
    pad = n_topics - state.phi.shape[-1]
    if pad < 0:
        raise ValueError(f"cannot pad {state.phi.shape[-1]} topics to {n_topics}")
    if pad == 0:
        return state
    return state._replace(phi=jnp.pad(state.phi, ((0, 0), (0, pad))), theta=jnp.pad(state.theta, ((0, pad), (0, 0))),
                          topic_alive=jnp.pad(state.topic_alive, (0, pad)), dead_topics=jnp.pad(state.dead_topics, (0, pad)))


def doc_columns(theta, data):
    """The columns of Θ that are ``data``'s documents: all of them, but those of a layout that
    pads a sharded Θ (:meth:`ShardedCounts.doc_columns <topicjax.core.sharding.ShardedCounts.doc_columns>`)."""
    own = getattr(data, "doc_columns", None)
    return theta if own is None else own(theta)


def place(state: EMState, data) -> EMState:
    """The start of a fit on the mesh of the sharded layout ``data`` from :func:`init`'s state of
    no documents (``init(key, W, 0, T, ...)``, the same in every process): Φ, the regularizers'
    data and the topic masks replicated; Θ with ``data.theta_width`` columns laid out as
    ``data.theta_sharding``: uniform over the alive topics in the columns of ``data``'s documents
    (:func:`init`'s Θ), 0 in the padding columns (``doc_alive`` 0), each device's block computed
    on its device, so that no process ever holds the whole Θ."""
    if state.theta.shape[1] != 0:
        raise ValueError(f"place starts Θ on the mesh itself: give it init's state of 0 documents, not "
                         f"{state.theta.shape[1]}")
    width, n_docs, dtype, alive_dtype = data.theta_width, data.n_docs, state.theta.dtype, state.doc_alive.dtype
    alive = host_array(state.topic_alive)
    start = (alive / alive.sum()).astype(dtype)
    replicated = NamedSharding(data.mesh, PartitionSpec())

    def theta():
        return jnp.where(jnp.arange(width)[None, :] < n_docs, jnp.asarray(start)[:, None], jnp.zeros((), dtype))

    def docs():
        is_doc = jnp.arange(width) < n_docs
        return is_doc.astype(alive_dtype), jnp.zeros(width, bool)

    state = replicate(data.mesh, state._replace(theta=None, doc_alive=None, dead_docs=None))
    doc_alive, dead_docs = compiled.jit(docs, out_shardings=(replicated, replicated))()
    return state._replace(theta=compiled.jit(theta, out_shardings=data.theta_sharding)(), doc_alive=doc_alive,
                          dead_docs=dead_docs)


def _mask_theta(theta, alive_t, alive_d):
    # normalize(normalize(a) * m) = normalize(a * m): masking after the M-step's normalisation
    # gives the Θ of a model without those topics
    return mstep.normalize_columns(theta * alive_t[:, None]) * alive_d[None, :]


def penalties(reg, params, iteration, data=None):
    """``(penalty, keep)`` for the M-step: the weighted regularizer at ``iteration`` with its data
    ``params``, and its terms that never empty a column (``None`` when there are none).  Given the
    layout ``data``, they see Θ's columns of its documents only (:func:`doc_columns`: a sharded
    Θ's padding off)."""
    penalty = None if not reg.terms else (lambda p, t: reg.penalty(p, doc_columns(t, data), params, iteration))
    keep = None if not reg.keeps_one else (
        lambda p, t: reg.penalty(p, doc_columns(t, data), params, iteration, keep_one=True))
    return penalty, keep


def step(state: EMState, data, reg, aux: EMAux | None = None, cfg: EMConfig = EMConfig()) -> EMState:
    """One regularized EM iteration (ARTM eq. 14-16) with the bookkeeping of Notes 1-2."""
    aux = EMAux() if aux is None else aux
    it = state.iteration + 1
    alive_t, alive_d = state.topic_alive, state.doc_alive
    if cfg.remove:  # removed documents (Note 2) contribute no counts
        data = reweight_docs(data, alive_d)
    params = state.params
    penalty, keep = penalties(reg, params, it, data)
    masking = cfg.remove or cfg.mask_topics
    theta = state.theta
    if cfg.doc_passes:
        theta = jnp.broadcast_to((alive_t / alive_t.sum())[:, None], theta.shape).astype(theta.dtype)
        theta = theta_passes(state.phi, theta, data, penalty, keep, cfg.doc_passes,
                             (lambda th: _mask_theta(th, alive_t, alive_d)) if masking else None)
    loglik = estep.log_likelihood if cfg.update_phi else estep.log_likelihood_theta
    ll, r, phi, theta, finite, empty_phi, empty_theta = mstep.m_step(
        lambda p, t: loglik(p, t, data), state.phi, theta, penalty, update_phi=cfg.update_phi,
        segments=aux.segments, n_segments=cfg.n_segments, keep=keep)
    # Emptied columns as the M-step's normalisation found them, not as sums over the new Φ and Θ:
    # XLA would compute those from the old Φ and Θ and keep a copy of them (see mstep.m_step).
    if cfg.update_phi:  # dead when the block of a modality that counts is empty
        dead_t = jnp.any(empty_phi & aux.active[:, None], axis=0) if cfg.n_segments > 1 else empty_phi[0]
    else:
        dead_t = jnp.zeros(phi.shape[1], bool)
    # A topic is also out of the model when no remaining document uses it any more (after topic
    # selection, say): its θ row is zero although its φ column is still defined.
    unused = jnp.all((theta <= 0) | (alive_d[None, :] <= 0), axis=1)
    dead_t = (dead_t | unused) & (alive_t > 0)
    dead_d = empty_theta & (alive_d > 0)
    if masking:
        if cfg.remove:
            alive_t = alive_t * (~dead_t).astype(alive_t.dtype)
            alive_d = alive_d * (~dead_d).astype(alive_d.dtype)
        # masked topics get no mass: a smoothing term would otherwise give them some
        if cfg.update_phi:
            phi = phi * alive_t[None, :]
        theta = _mask_theta(theta, alive_t, alive_d)
    place_theta = getattr(data, "place_theta", None)
    if place_theta is not None:
        theta = place_theta(theta)
    params = tuple(t.update(phi, doc_columns(theta, data), p, t.coef(it)) if t.update is not None else p
                   for t, p in zip(reg.terms, params))
    return EMState(phi, theta, ll, r, it, params, alive_t, alive_d, dead_t, dead_d, finite)


def make_step(regularizers=None, *, cfg: EMConfig = EMConfig(remove=False), jit: bool = True):
    """``step(state, data, aux=None) -> state``: :func:`step` with ``regularizers`` (anything
    :func:`topicjax.regularizers.as_regularizer` accepts: a plain ``R(phi, theta)``, pool members,
    ``(R, tau)`` pairs) for hand-written loops, benchmarks and notebooks.  Pool members that need a
    model are bound to one built from the shapes of Φ and Θ; a state from :func:`init` without
    regularizer data uses the regularizer's own.  By default over-regularized topics and documents
    are kept (``cfg=EMConfig(remove=True)`` removes them).  The estimators use :func:`step`.

    >>> import jax, jax.numpy as jnp, topicjax as tj
    >>> from topicjax.artm import algorithm as em
    >>> from topicjax.core import layout
    >>> corpus = tj.datasets.make_bars(n_docs=40, seed=0)[0]
    >>> def decor(phi, theta):
    ...     s = phi.sum(1)
    ...     return -(jnp.sum(s * s) - jnp.sum(phi * phi))
    >>> state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 5)
    >>> state = em.make_step((decor, 10.0))(state, layout.prepare(corpus))
    >>> state.phi.shape
    (25, 5)
    """
    reg0 = as_regularizer(regularizers)

    def one(state: EMState, data, aux: EMAux | None = None) -> EMState:
        reg = reg0
        if not all(t.bound for t in reg.terms):
            W, T = state.phi.shape
            reg = reg.bind(Context(n_words=W, n_topics=T, n_docs=state.theta.shape[1]))
        reg = reg.cast(state.phi.dtype)
        if len(state.params) != len(reg.terms):
            state = state._replace(params=reg.params)
        return step(state, data, reg, aux, cfg)

    return compiled.jit(one) if jit else one


def health(state: EMState, update_phi: bool = True):
    """``(finite, present)`` on the device: every value finite (the counts of the last M-step
    too), and at least one topic (a non-zero column of Φ used by some document) and one document
    (a non-zero θ_d) left."""
    finite = (jnp.isfinite(state.phi).all() & jnp.isfinite(state.theta).all() & jnp.isfinite(state.loglik)
              & jnp.asarray(state.finite))
    used = state.theta.sum(1) > 0
    if update_phi:
        used = used & (state.phi.sum(0) > 0)
    present = jnp.any(used) & jnp.any(state.theta.sum(0) > 0)
    return finite, present


def infer_theta(phi, data, n_docs: int, reg, *, n_iter: int = 30, params=None, topic_alive=None, aux: EMAux | None = None,
                cfg: EMConfig = EMConfig(update_phi=False, remove=False)):
    """Θ of (new) documents with Φ fixed: ``n_iter`` iterations of eq. 16 from uniform Θ over
    the topics alive in the model (``topic_alive``), with the Θ-terms of ``reg``."""
    return _infer_jit(phi, data, n_docs, reg, n_iter, params, topic_alive, aux, cfg)


def _infer(phi, data, n_docs, reg, n_iter, params, topic_alive, aux, cfg):
    T = phi.shape[1]
    alive = jnp.ones(T, phi.dtype) if topic_alive is None else jnp.asarray(topic_alive, phi.dtype)
    theta0 = jnp.broadcast_to((alive / alive.sum())[:, None], (T, n_docs)).astype(phi.dtype)
    z = jnp.zeros((), phi.dtype)
    state = EMState(phi, theta0, z, z, jnp.zeros((), jnp.int32), reg.params if params is None else params, alive,
                    jnp.ones(n_docs, phi.dtype), jnp.zeros(T, bool), jnp.zeros(n_docs, bool), jnp.array(True))
    cfg = cfg._replace(update_phi=False, mask_topics=topic_alive is not None or cfg.mask_topics)
    state, _ = jax.lax.scan(lambda s, _: (step(s, data, reg, aux, cfg), None), state, None, length=n_iter)
    return state.theta


_infer_jit = numerics.full_precision(compiled.jit(_infer, static_argnames=("n_docs", "n_iter", "cfg")))


# ----------------------------------------------------------------------------- for the drivers
class EMStatic(NamedTuple):
    """Static part of a fit for the drivers: the step's config, device score functions
    ``f(phi, theta, specific_mask) -> dict`` recorded every iteration, and the number of word
    rows of Φ (the rows after them are class rows, ARTM Theorem 3)."""

    cfg: EMConfig = EMConfig()
    device_scores: tuple = ()
    n_word_rows: int | None = None


def _algo_step(state, args, static: EMStatic):
    data, reg, aux = args
    return step(state, data, reg, aux, static.cfg)


def _algo_objective(state, args, static):
    return state.loglik


def _algo_record(state, args, static: EMStatic):
    data, reg, aux = args
    rec = {"objective": state.loglik, "regularizer": state.reg, "dead_topics": state.dead_topics,
           "dead_docs": state.dead_docs.sum()}
    if reg.terms:  # no zero-size leaves: lax.map cannot reshape them when it batches models
        rec["coefs"] = reg.coef_values(state.iteration)
    if static.device_scores:
        phi = state.phi if static.n_word_rows is None else state.phi[: static.n_word_rows]
        specific = state.topic_alive > 0
        if aux is not None and aux.background is not None:
            specific = specific & ~aux.background
        for f in static.device_scores:
            rec.update(f(phi, doc_columns(state.theta, data), specific))
    return rec


def _algo_health(state, static: EMStatic):
    return health(state, static.cfg.update_phi)


#: Regularized EM for the drivers: ``args = (data, reg, aux)``, static :class:`EMStatic`.
ARTM_EM = Algorithm(step=_algo_step, objective=_algo_objective, record=_algo_record, health=_algo_health)

#: The :class:`~topicjax.core.driver.Algorithm` the driver runs (the name every family's algorithm
#: module has): :data:`ARTM_EM`.
ALGORITHM = ARTM_EM
