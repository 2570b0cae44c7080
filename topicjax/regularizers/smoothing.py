"""Smoothing and sparsing of Φ and Θ (ARTM eq. 23-26) and the rate control of sec. 5."""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.estep import EPS
from topicjax.regularizers.base import Context, Regularizer, custom, register
from topicjax.regularizers.resolve import (as_data, check_rate, doc_index, doc_lengths, row_mask, spec, topic_distribution,
                                           topic_index, topic_mask, word_distribution, word_index)

__all__ = ["smooth_phi", "sparse_phi", "smooth_theta", "sparse_theta", "phi_log_fn", "theta_log_fn", "rate_threshold"]


def phi_log_fn(phi, theta, p):
    # sign Σ_wt β_wt m_t c_t ln φ_wt: smoothing (sign +1, eq. 23), sparsing (sign -1, eq. 25),
    # seed words (β_wt of eq. 27).  φ ∂R/∂φ = sign β_wt m_t c_t.
    return p["sign"] * jnp.sum((p["beta"] * (p["tmask"] * p["scale"])) * jnp.log(phi))


def theta_log_fn(phi, theta, p):
    # sign Σ_td α_td m_t c_d ln θ_td (eq. 23, 25, 27).  θ ∂R/∂θ = sign α_td m_t c_d.
    return p["sign"] * jnp.sum((p["alpha"] * p["tmask"][:, None]) * p["scale"][None, :] * jnp.log(theta))


def _kth_smallest(logv, valid, k, n_steps):
    """Per column, log of the smallest value with at least ``k`` valid values at or below it,
    by bisection on log-values (``n_steps`` counting passes instead of a sort, which is slow on
    CPU; 40 halvings reach float32 resolution)."""
    big = jnp.asarray(jnp.finfo(logv.dtype).max, logv.dtype)
    lo = jnp.min(jnp.where(valid, logv, big), axis=0) - 1e-3
    hi = jnp.max(jnp.where(valid, logv, -big), axis=0)

    def body(_, lh):
        lo, hi = lh
        mid = 0.5 * (lo + hi)
        enough = jnp.sum(valid & (logv <= mid[None, :]), axis=0) >= k
        return jnp.where(enough, lo, mid), jnp.where(enough, mid, hi)

    return jax.lax.fori_loop(0, n_steps, body, (lo, hi))[1]


def rate_threshold(vals, valid, rate, carry, n_steps: int = 40):
    """Per column, a threshold c with the ``k`` smallest of the ``n`` valid values below it,
    midway between the k-th and (k+1)-th smallest (half the smallest when k = 0).

    ``k = floor(carry + rate n)`` and the fraction left over is carried to the next iteration, so
    that over the iterations ``rate`` of the non-zeros are targeted even in columns with few of
    them (6 non-zeros at 8%: one every other iteration, not one every iteration).  ``k`` never
    reaches ``n``: the largest value of a column is always above the threshold, so the sparsing
    of the paper's trajectory (τ = 1) keeps at least one non-zero in every column, and when the
    cap binds the remainder is dropped instead of piling up (without the cap a one-topic document
    lost its last topic after 1/rate iterations and vanished).  Returns ``(c, new carry)``."""
    v = jnp.where(valid, vals, 1.0)
    logv = jnp.log(jnp.maximum(v, EPS))
    n = valid.sum(0).astype(vals.dtype)
    want = carry + rate * n
    k = jnp.minimum(jnp.floor(want), jnp.maximum(n - 1, 0))
    capped = k < jnp.floor(want)
    ck = jnp.exp(_kth_smallest(logv, valid, jnp.maximum(k, 1.0), n_steps))
    ck1 = jnp.exp(_kth_smallest(logv, valid, jnp.minimum(k + 1, n), n_steps))
    c = 0.5 * (ck + ck1)
    # k = 0: half the smallest value, so that entries already at zero stay there (the E-step of
    # a zero entry, clamped at EPS, is tiny but positive) and no genuine one is removed
    c = jnp.where(k >= 1, c, 0.5 * ck)
    new_carry = jnp.where(capped, 0.0, want - k)
    return jnp.where(n > 0, c, 0.0).astype(vals.dtype), new_carry.astype(vals.dtype)


def _sparse_phi_rate_update(phi, theta, p, tau):
    # Rate control (ARTM sec. 5): c_t is the `rate` quantile of n_wt / β_w over the non-zeros of
    # the sparsed part of column t, with n_wt ≈ n_t φ_wt (n_t = Σ_d n_d θ_td); the next M-step
    # (n_wt - τ c_t β_w)_+ with τ = 1 then zeroes about that share of them.
    n_t = theta @ p["doc_lengths"]
    b = p["beta"]
    sel = (phi > 0) & (b > 0) & (p["tmask"] > 0)[None, :]
    vals = n_t[None, :] * phi / jnp.where(b > 0, b, 1.0)
    c, carry = rate_threshold(vals, sel, p["rate"], p["carry"])
    return {**p, "scale": c, "carry": carry}


def _sparse_theta_rate_update(phi, theta, p, tau):
    # c_d: the `rate` quantile of n_td / α_t ≈ n_d θ_td / α_t over the non-zeros of θ_d.
    a = p["alpha"]
    sel = (theta > 0) & (a > 0) & (p["tmask"] > 0)[:, None]
    vals = theta * p["doc_lengths"][None, :] / jnp.where(a > 0, a, 1.0)
    c, carry = rate_threshold(vals, sel, p["rate"], p["carry"])
    return {**p, "scale": c, "carry": carry}


def _phi_log_regularizer(factory, sign, beta, topics, modalities, rate, name, spec):
    rate = check_rate(rate, name)

    def binder(ctx: Context):
        rows = row_mask(modalities, ctx)
        b = word_distribution(beta, ctx, rows, name)
        p = {
            "sign": np.float64(sign),
            "beta": as_data(b[:, None]),
            "tmask": as_data(topic_mask(topics, ctx)),
            "scale": np.ones(ctx.n_topics),
        }
        if rate is not None:
            p["rate"] = np.float64(rate)
            p["doc_lengths"] = as_data(doc_lengths(ctx, name))
            p["carry"] = np.zeros(ctx.n_topics)
        return p

    return custom(
        phi_log_fn, name=name, binder=binder, nonnegative=True, uses_theta=False,
        update=_sparse_phi_rate_update if rate is not None else None, spec=spec, keep_one=rate is not None,
    )


@register()
def smooth_phi(beta=None, topics=None, modalities=None) -> Regularizer:
    """Smoothing of Φ (eq. 23): ``R = Σ_{t∈topics} Σ_w β_w ln φ_wt``; M-step ``φ_wt ∝ n_wt + τ β_w``
    (eq. 24).  With the default β_w = 1 and τ = β this is LDA's M-step (eq. 10) for Φ.

    ``beta``: ``None`` (1 per word), ``"uniform"`` (1/|W|), ``"background"`` (n_w / n, the
    collection's word frequencies) or an array over the words.  ``topics``: see module docstring.
    ``modalities``: names of the modalities whose rows are smoothed (default: all word rows).
    """
    return _phi_log_regularizer("smooth_phi", 1.0, beta, topics, modalities, None, "smooth_phi",
                                spec("smooth_phi", beta=beta, topics=topics, modalities=modalities))


@register()
def sparse_phi(beta=None, topics=None, modalities=None, rate=None) -> Regularizer:
    """Sparsing of Φ (eq. 25): ``R = -Σ_{t∈topics} c_t Σ_w β_w ln φ_wt``; M-step
    ``φ_wt ∝ (n_wt - τ c_t β_w)_+`` (eq. 26).

    ``beta`` as in :func:`smooth_phi` (the paper uses ``"uniform"`` or ``"background"``).
    Without ``rate``, c_t = 1.  With ``rate`` (e.g. 0.1), c_t is re-estimated after every pass
    as the ``rate`` quantile of n_wt / β_w over the non-zeros of column t, so that τ = 1 zeroes
    about that share of each φ_t per iteration: the paper's trajectory (sec. 5).
    """
    return _phi_log_regularizer("sparse_phi", -1.0, beta, topics, modalities, rate, "sparse_phi",
                                spec("sparse_phi", beta=beta, topics=topics, modalities=modalities, rate=rate))


def _theta_log_regularizer(sign, alpha, topics, docs, rate, name, spec):
    rate = check_rate(rate, name)

    def binder(ctx: Context):
        a = topic_distribution(alpha, ctx, name)[:, None]
        if docs is not None:
            dm = np.zeros(ctx.n_docs)
            for d in np.atleast_1d(np.asarray(docs, dtype=object)):
                dm[doc_index(d, ctx.n_docs, name)] = 1.0
            a = a * dm[None, :]
        p = {
            "sign": np.float64(sign),
            "alpha": as_data(a),
            "tmask": as_data(topic_mask(topics, ctx)),
            "scale": np.ones(ctx.n_docs),
        }
        if rate is not None:
            p["rate"] = np.float64(rate)
            p["doc_lengths"] = as_data(doc_lengths(ctx, name))
            p["carry"] = np.zeros(ctx.n_docs)
        return p

    return custom(
        theta_log_fn, name=name, binder=binder, nonnegative=True, uses_phi=False,
        update=_sparse_theta_rate_update if rate is not None else None, update_in_transform=True,
        per_document=docs is not None, spec=spec, keep_one=rate is not None,
    )


@register()
def smooth_theta(alpha=None, topics=None, docs=None) -> Regularizer:
    """Smoothing of Θ (eq. 23): ``R = Σ_d Σ_{t∈topics} α_t ln θ_td``; ``θ_td ∝ n_td + τ α_t``
    (eq. 24; LDA's α when α_t = 1 and τ = α).  ``docs``: restrict to these training documents."""
    return _theta_log_regularizer(1.0, alpha, topics, docs, None, "smooth_theta",
                                  spec("smooth_theta", alpha=alpha, topics=topics, docs=docs))


@register()
def sparse_theta(alpha=None, topics=None, docs=None, rate=None) -> Regularizer:
    """Sparsing of Θ (eq. 25): ``R = -Σ_d c_d Σ_{t∈topics} α_t ln θ_td``;
    ``θ_td ∝ (n_td - τ c_d α_t)_+`` (eq. 26).  With ``rate`` (e.g. 0.08), c_d is re-estimated
    after every pass so that τ = 1 zeroes about that share of the non-zeros of each θ_d
    (sec. 5); the rate control also runs when inferring Θ of new documents."""
    return _theta_log_regularizer(-1.0, alpha, topics, docs, rate, "sparse_theta",
                                  spec("sparse_theta", alpha=alpha, topics=topics, docs=docs, rate=rate))
