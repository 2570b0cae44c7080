"""Exact EM for TTMM (eq. 6-11) in log space, never building the J x K x W tensor Q (see
:mod:`topicjax.ttmm`), and its algorithm for the drivers of :mod:`topicjax.core.driver`.

The family's algorithm module, in the shape every family's has: :data:`State`
(:class:`TTMMEMState`), :func:`init` (:func:`em_init`), :func:`step` (:func:`em_step`) and
:data:`ALGORITHM` (:data:`TTMM_EM`: static ``None``, args ``(data,)``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from topicjax.core import driver, numerics
from topicjax.core.layout import DocWordCounts
from topicjax.ttmm.params import TTMMParams, random_params
from topicjax.ttmm.sweeps import EPS, normalize_rows, theme_terms, word_sums
from topicjax.core.compiled import jit

__all__ = ["TTMMEMState", "em_init", "em_step", "em_step_impl", "TTMM_EM", "loglik_measure", "loglik_value",
           "converged_double", "State", "init", "step", "ALGORITHM"]


class TTMMEMState(NamedTuple):
    """State of TTMM EM.  ``doc_loglik`` is log P(d) (eq. 3) of the parameters *before* the last
    step (a by-product of its E-step; zeros before the first step)."""

    params: TTMMParams
    doc_loglik: Float[Array, " D"]
    iteration: Int[Array, ""]


def em_init(key, n_themes: int, n_components: int, n_words: int, n_docs: int, *, dtype=jnp.float32,
            real_words=None) -> TTMMEMState:
    """Initial EM state from :func:`random_params` (depends on ``key`` only).  ``real_words``
    (traced): β's columns from it on are a bucket's padding, 0 (no token: EM keeps them 0)."""
    params = random_params(key, n_themes, n_components, n_words, dtype=dtype, real_words=real_words)
    return TTMMEMState(params, jnp.zeros((n_docs,), dtype), jnp.zeros((), jnp.int32))


def em_step_impl(state: TTMMEMState, data: DocWordCounts, n_docs=None) -> TTMMEMState:
    pi, tau, beta = state.params
    rows, n_words = state.doc_loglik.shape[0], beta.shape[1]
    # E-step: P_dj = P(h=j|d) (eq. 6) in log space.
    A, log_post, ll = theme_terms(state.params, data, rows)
    P = jnp.exp(log_post)
    if n_docs is not None:
        # rows from n_docs on are no document (a bucket's padding, no token): their posterior
        # would be π itself and log P(d) log Σ π; they count neither in π's update nor in L
        is_doc = (jnp.arange(rows) < n_docs)[:, None]
        P = jnp.where(is_doc, P, 0.0)
        ll = jnp.where(is_doc[:, 0], ll, 0.0)
    # R_jw = Σ_d P_dj n_dw / A_jw: the only (J x W) quantity the Q-weighted sums need.
    R = word_sums(P, data, n_words).T / jnp.maximum(A, EPS)
    # M-step: numerators of eq. 8, 9-10, 11, each Q-contraction factored (module docstring).
    n_j = P.sum(0)
    n_jk = tau * (R @ beta.T)
    n_kw = beta * (tau.T @ R)
    pi_new = n_j / n_j.sum()
    return TTMMEMState(
        TTMMParams(pi_new, normalize_rows(n_jk, tau), normalize_rows(n_kw, beta)), ll, state.iteration + 1
    )


em_step = numerics.full_precision(jit(em_step_impl))
em_step.__doc__ = """One EM iteration (E-step eq. 6-7, M-step eq. 8-11); ``(state, data[, n_docs]) -> state``.

``n_docs`` (traced; default: every row of ``state.doc_loglik``): the rows of the state that are
documents, the first ``n_docs``; the others are padding of a bucket (no token), left out of π's
update and of ``doc_loglik`` (0), so that corpora of similar size share the compiled step.

Never builds the J x K x W tensor Q: see the module docstring for the factored sums.  The returned
``doc_loglik`` is log P(d) of the input parameters, so L is non-decreasing along the returned
states (EM's monotonicity).
"""



def loglik_measure(doc_loglik):
    """L = Σ_d log P(d) as a double-float ``{"hi", "lo"}`` (float32 totals lose the small changes
    EM makes; the pair keeps the exact sum of the float32 terms)."""
    hi, lo = numerics.compensated_sum(doc_loglik)
    return {"hi": hi, "lo": lo}


def converged_double(old, new, tol):
    """The relative-change rule (:func:`topicjax.core.driver.relative_change_converged`) on
    double-floats: ``|Δ| <= tol · |L|``."""
    change = (new["hi"] - old["hi"]) + (new["lo"] - old["lo"])
    return driver.relative_change_converged(change, new["hi"], tol)


def loglik_value(m):
    """The float32 value of a :func:`loglik_measure` (for histories and checks)."""
    return m["hi"]


def _step(state, args, static):
    return em_step_impl(state, *args)


def _objective(state, args, static):
    return loglik_measure(state.doc_loglik)


def _record(state, args, static):
    return loglik_measure(state.doc_loglik)


def _health(state, static):
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(state.params)]))
    return finite, jnp.array(True)


#: TTMM EM for the drivers: args ``(data,)`` or ``(data, n_docs)`` (:func:`em_step`), the layout of
#: :func:`topicjax.ttmm.sweeps.theme_layout`.
TTMM_EM = driver.Algorithm(step=_step, objective=_objective, record=_record, health=_health,
                           converged=converged_double, value=loglik_value)


#: The state type (the name every family's algorithm module has): :class:`TTMMEMState`.
State = TTMMEMState
#: The initial state: :func:`em_init`.
init = em_init
#: :func:`em_init` as one compiled program (eager, its zeros compiled a program each)
init_compiled = jit(em_init, static_argnums=(1, 2, 3, 4), static_argnames=("dtype",))
#: One EM iteration: :func:`em_step`.
step = em_step
#: The :class:`~topicjax.core.driver.Algorithm` the driver runs: :data:`TTMM_EM`.
ALGORITHM = TTMM_EM
