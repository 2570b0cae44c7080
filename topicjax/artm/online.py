"""The online algorithm of PLSA/ARTM (BigARTM's ``fit_online``): its state and its step per batch.

An algorithm module in the shape of every family's (:data:`State`, :func:`init`, :func:`step`,
:data:`ALGORITHM`); it lives with ARTM since its step takes the ARTM regularizer.

Vorontsov et al., ARTM sec. 4 "online algorithm"; Hoffman et al. 2010 for the step size.  For
each batch ``b``:

1. Θ_b of its documents starts from uniform and takes ``doc_passes`` iterations of ARTM
   eq. 16 with Φ fixed (with the regularizer's Θ terms, if any);
2. one full E-step at Θ_b gives the batch's counts ``n̂_wt = φ_wt ∂L_b/∂φ_wt`` (eq. 7), added
   up over ``update_every`` batches;
3. then ``n_wt ← (1 - ρ) n_wt + ρ n̂_wt`` with ``ρ = (τ0 + t)^(-κ)``, ``t`` the number of
   updates so far, and ``Φ ∝ (n_wt + φ ∂R/∂φ)_+`` (eq. 15) by the one M-step of
   :mod:`topicjax.core.mstep` (the counts enter as :func:`~topicjax.core.mstep.counts_likelihood`).

Steps 1-2 are the offline pass of ``ARTM(doc_passes=...)``, so with one batch and ρ = 1 the
online fit is the offline fit.  :func:`batch_step` is one batch; :data:`ONLINE_EM` packages it for
the driver of :mod:`topicjax.core.driver` (one iteration = one batch).  Its users:
:func:`topicjax.scale.online.fit_online` (over an on-disk batch store) and
``ARTM.partial_fit`` (:mod:`topicjax.artm.partial`, one batch per call); both keep the fitted
state as an ARTM through :meth:`topicjax.artm.ARTM._from_online_state`.

BigARTM's defaults are ``tau0 = 1024, kappa = 0.7, update_every = 1``.  Memory is Φ, n_wt (both
W x T) and one batch (its counts and its T x batch_size Θ): it does not grow with the number of
documents.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from topicjax.artm import algorithm as em
from topicjax.core import driver, estep, layout, mstep
from topicjax.core.foldin import theta_passes

__all__ = ["OnlineState", "OnlineStatic", "online_init", "batch_step", "ONLINE_EM", "State", "init", "step",
           "ALGORITHM"]


class OnlineState(NamedTuple):
    """Φ (W, T), the running counts n_wt (W, T), the pending batch counts, the update count, the
    last batch's log-likelihood and the regularizers' data."""

    phi: jax.Array
    n_wt: jax.Array
    pending: jax.Array
    updates: jax.Array
    loglik: jax.Array
    params: tuple = ()


class OnlineStatic(NamedTuple):
    doc_passes: int = 10
    kappa: float = 0.7
    tau0: float = 1024.0


def online_init(key, n_words: int, n_components: int, *, reg=None, dtype=jnp.float32, phi=None) -> OnlineState:
    """The start of the online algorithm: Φ as :func:`topicjax.artm.algorithm.init` draws it (the same Φ
    for the same key; or a fitted model's ``phi``) and running counts ``n_wt = Φ``, a pseudo-count
    mass of one per topic spread over every word (BigARTM's start: its n_wt after ``initialize``
    is its random p_wt).

    Why not zero counts: the E-step is multiplicative (``n̂_wt = φ_wt ∂L/∂φ_wt``), so a word with
    ``φ_wt = 0`` never receives counts again.  From zero counts the first update makes Φ zero on
    every word the first batch does not contain, for ever (10,861 of 22,379 words of 20 Newsgroups
    in batches of 1,000 documents).  The start's mass is positive on every word but small against
    one batch's counts (ρ n̂ holds ρ x the batch's tokens), so it keeps every word alive until its
    batch comes without holding Φ near its random start."""
    if phi is None:
        phi = em.init(key, n_words, 1, n_components, dtype=dtype).phi
    else:
        phi = jnp.asarray(phi, dtype)
    n_wt = phi
    return OnlineState(phi, n_wt, jnp.zeros_like(phi), jnp.zeros((), jnp.int32), jnp.zeros((), dtype),
                       () if reg is None else reg.params)


def batch_step(state: OnlineState, data: layout.DocWordCounts, reg, apply_update, static: OnlineStatic, n_docs: int):
    """One batch of the online algorithm: the pass of :func:`topicjax.artm.algorithm.step` with
    ``doc_passes`` (Θ of the batch from uniform, ``doc_passes`` Θ-only iterations, then one
    full E-step whose counts ``n̂_wt`` are added to ``pending``); when ``apply_update`` (traced)
    ``n_wt ← (1 - ρ) n_wt + ρ pending``, ``ρ = (tau0 + t)^(-kappa)``, and Φ is the one M-step
    :func:`topicjax.core.mstep.m_step` of the counts ``n_wt`` with the regularizer's Φ terms at
    the batch's Θ (eq. 15)."""
    phi = state.phi
    T = phi.shape[1]
    it = state.updates + 1
    penalty, keep = em.penalties(reg, state.params, it)
    theta = theta_passes(phi, jnp.full((T, n_docs), 1.0 / T, phi.dtype), data, penalty, keep, static.doc_passes)
    ll, g_phi, _ = estep.expected_counts(phi, theta, data, need_theta=False)
    pending = state.pending + phi * g_phi

    def update(_):
        rho = jnp.power(static.tau0 + state.updates.astype(phi.dtype), -static.kappa)
        n_wt = (1 - rho) * state.n_wt + rho * pending
        new_phi = mstep.m_step(mstep.counts_likelihood(n_wt), phi, theta, penalty, keep=keep)[2]
        return state._replace(phi=new_phi, n_wt=n_wt, pending=jnp.zeros_like(pending), updates=state.updates + 1)

    state = jax.lax.cond(apply_update, update, lambda _: state._replace(pending=pending), None)
    return state._replace(loglik=ll)


def _algo_step(state, args, static):
    data, reg, apply_update, _ = args
    return batch_step(state, data, reg, apply_update, static[0], static[1])


def _algo_objective(state, args, static):
    return state.loglik


def _algo_record(state, args, static):
    return {"updates": state.updates}


def _algo_health(state, static):
    return jnp.isfinite(state.phi).all() & jnp.isfinite(state.loglik), jnp.any(state.phi.sum(0) > 0)


#: The online algorithm for :func:`topicjax.core.driver.run` (one iteration = one batch).
ONLINE_EM = driver.Algorithm(step=_algo_step, objective=_algo_objective, record=_algo_record, health=_algo_health)


#: The state type (the name every family's algorithm module has): :class:`OnlineState`.
State = OnlineState
#: The start of the algorithm: :func:`online_init`.
init = online_init
#: One batch: :func:`batch_step`.
step = batch_step
#: The :class:`~topicjax.core.driver.Algorithm` the driver runs: :data:`ONLINE_EM`.
ALGORITHM = ONLINE_EM
