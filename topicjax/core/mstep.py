"""THE M-step of the EM family: ``normalize((x ⊙ ∇(L + R))₊)``, written once.

For the log-likelihood ``L(Φ, Θ) = Σ n_dw log Σ_t φ_wt θ_td`` the E-step counts are
``n_wt = φ_wt ∂L/∂φ_wt`` and ``n_td = θ_td ∂L/∂θ_td`` (ARTM eq. 7-8), so the regularized M-step of
Theorem 2 (eq. 14-16) for any differentiable regularizer R is

    φ_wt ∝ (φ_wt ∂(L + R)/∂φ_wt)₊ ,      θ_td ∝ (θ_td ∂(L + R)/∂θ_td)₊ .

:func:`regularized_counts` computes ``x ⊙ ∇(L + R)`` with ONE ``jax.value_and_grad`` for any
likelihood ``L`` whose gradient gives counts -- the local E-step of :mod:`topicjax.core.estep`,
the same summed over devices (:mod:`topicjax.scale.distributed`), or a running total of counts
(the online algorithm, :mod:`topicjax.scale.online`) -- and :func:`normalize_columns` is the
positive part and normalisation, per column or per block of rows (one distribution per modality).
PLSA, ARTM, the offline, online and sharded fits all call these two functions.

The clamp convention (one, everywhere): R is evaluated at Φ and Θ clamped at :data:`EPS`,
``v = max(x, EPS)``, its gradient is taken there, and the gradients are multiplied by ``v``:
``A = v ⊙ (∇L(x) + ∇R(v))``.  So terms such as ``β Σ log φ_wt`` (smoothing, eq. 23) give their
finite limit ``φ ∂R/∂φ = β`` at φ = 0 instead of ``0 · ∞``; the likelihood itself is
differentiated at Φ and Θ (the E-step reads the arrays it is given, no clamped copies).
(:func:`clamped`, a straight-through clamp with the same value and first derivative, remains
for code that evaluates a regularizer's gradient at a state.)

How this is differentiated (gradients of a whole fit with respect to coefficients,
:mod:`topicjax.tune`):

* the positive part ``max(a, 0)`` has derivative 1 where ``a > 0`` and 0 elsewhere (JAX's
  convention at the kink), so an entry zeroed by sparsing has zero derivative and stays finite;
  a column with no positive entry becomes zeros (an over-regularized topic or document, ARTM
  Notes 1-2), never NaN, and its derivative is zero;
* the clamp ``v = max(x, EPS)`` has derivative 1 above EPS and exactly 0 below (a select, not a
  product, so the huge second derivatives of ``log`` at EPS -- ``β/EPS²`` overflows float32 --
  never reach the result): the M-step's terms of an entry at zero do not move with it, which is
  the derivative of ``β`` (their value) and what keeps zeroed entries' derivatives finite.

>>> import jax.numpy as jnp
>>> from topicjax.core.mstep import normalize_columns
>>> normalize_columns(jnp.array([[1.0, -1.0], [3.0, -2.0]])).tolist()
[[0.25, 0.0], [0.75, 0.0]]
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from topicjax.core.numerics import EPS

__all__ = ["EPS", "clamped", "regularized_counts", "normalize_columns", "m_step", "counts_likelihood"]


def clamped(x):
    """``max(x, EPS)`` in value with the gradient of ``x`` (a straight-through clamp)."""
    return x + jax.lax.stop_gradient(jnp.maximum(x, EPS) - x)


def _keep_best(a, b):
    """Columns of ``a`` with no positive entry take the largest entry of ``b`` there (if positive)."""
    lost = ~jnp.any(a > 0, axis=0) & jnp.any(b > 0, axis=0)
    best = jnp.argmax(b, axis=0)
    rows = jnp.arange(a.shape[0])[:, None] == best[None, :]
    return jnp.where(lost[None, :] & rows, b, a)


def regularized_counts(loglik: Callable, phi, theta, penalty: Callable | None = None, *, update_phi: bool = True,
                       keep: Callable | None = None):
    """``x ⊙ ∇(L + R)`` for ``x = Φ, Θ`` with one ``jax.value_and_grad``.

    ``loglik(phi, theta) -> L`` is a likelihood whose gradient gives the E-step counts (a
    ``custom_vjp`` E-step); ``penalty(phi, theta) -> R`` the weighted regularizer (or ``None``).
    Returns ``(L, R, A_phi, A_theta)`` with ``A_phi = n_wt + φ ∂R/∂φ`` (``None`` when
    ``update_phi`` is False: Φ is then a constant and only Θ's gradient is taken) and
    ``A_theta = n_td + θ ∂R/∂θ`` (eq. 15-16 before the positive part and normalisation).

    ``keep(phi, theta)``: the part of R whose terms promise never to empty a column
    (rate-controlled sparsing, sec. 5): where a column of A has no positive entry but the column
    without those terms has, its largest entry keeps that value, so the column keeps one
    non-zero (costs one gradient of ``keep`` alone: elementwise work, no E-step).
    """
    # R and the factor x are taken at the clamped point v = max(x, EPS) given as arguments of
    # their own (the gradient of R at v, as a straight-through clamp gives); `where` rather than
    # `maximum` so that the derivative of v in an entry below EPS is an exact zero (a select),
    # whatever the second derivatives of R there (see the module docstring).
    def clamp(x):
        return jnp.where(x > EPS, x, jnp.asarray(EPS, x.dtype))

    if penalty is None:

        def objective(p, t, vp, vt):
            ll = loglik(p, t)
            return ll, (ll, jnp.zeros((), ll.dtype))

    else:

        def objective(p, t, vp, vt):
            ll = loglik(p, t)
            r = jnp.asarray(penalty(vp, vt), ll.dtype)
            return ll + r, (ll, r)

    v_theta = clamp(theta)
    if update_phi:
        v_phi = clamp(phi)
        (_, (ll, r)), (gl_phi, gl_theta, gr_phi, gr_theta) = jax.value_and_grad(
            objective, argnums=(0, 1, 2, 3), has_aux=True)(phi, theta, v_phi, v_theta)
        a_phi, a_theta = v_phi * (gl_phi + gr_phi), v_theta * (gl_theta + gr_theta)
    else:
        phi = jax.lax.stop_gradient(phi)
        v_phi = clamp(phi)
        (_, (ll, r)), (gl_theta, gr_theta) = jax.value_and_grad(
            lambda t, vt: objective(phi, t, v_phi, vt), argnums=(0, 1), has_aux=True)(theta, v_theta)
        a_phi, a_theta = None, v_theta * (gl_theta + gr_theta)
    if keep is not None:
        k_phi, k_theta = jax.grad(keep, argnums=(0, 1))(v_phi, v_theta)
        a_theta = _keep_best(a_theta, a_theta - v_theta * k_theta)
        if update_phi:
            a_phi = _keep_best(a_phi, a_phi - v_phi * k_phi)
    return ll, r, a_phi, a_theta


def _normalize(a, segments, n_segments):
    # `a >= 0` or NaN: (a / Σ a, Σ a) per column or per block of rows; a column (block) whose sum
    # is not a positive number becomes zeros
    if segments is None or n_segments == 1:
        sums = a.sum(0, keepdims=True)
        s = sums
    else:
        # The blocks' sums as a matrix product, not a scatter-add (segment_sum): beside a
        # scatter-add XLA:CPU keeps `a` in a buffer of its own instead of writing it over the old
        # Φ of a fit's loop (8.5 MB on 20 Newsgroups at T = 100), and on GPUs the sums then do
        # not depend on the order of atomic additions.  (A NaN spreads to the column's other
        # blocks: the step is not finite then anyway.)
        onehot = (segments[:, None] == jnp.arange(n_segments)[None, :]).astype(a.dtype)
        sums = jnp.einsum("wm,wt->mt", onehot, a, precision=jax.lax.Precision.HIGHEST)
        s = sums[segments]
    return jnp.where(s > 0, a / jnp.where(s > 0, s, 1), 0), sums


def normalize_columns(a: Float[Array, "N K"], segments=None, n_segments: int = 1) -> Float[Array, "N K"]:
    """Column-wise ``a₊ / Σ a₊``; a column with no positive entry becomes all zeros (an
    over-regularized topic or document, ARTM Notes 1-2) instead of NaN.

    With ``segments`` (an int per row, ``n_segments`` of them) every block of rows of a column
    is normalised separately: one distribution per modality in each topic of Φ.
    """
    return _normalize(jnp.maximum(a, 0), segments, n_segments)[0]


def _normalize_checked(a, segments, n_segments):
    # The positive part with NaN where `a` is not finite: the normaliser's own column sums are
    # then NaN exactly where a column (block) holds a non-finite count, so that one pass answers
    # "finite?" and "emptied?" as well (see m_step).  Returns (normalised, emptied, finite).
    a = jnp.where(jnp.isfinite(a), jnp.maximum(a, 0), jnp.nan)
    out, sums = _normalize(a, segments, n_segments)
    return out, ~((sums > 0) & jnp.isfinite(sums)), ~jnp.any(jnp.isnan(sums))


def m_step(loglik: Callable, phi, theta, penalty: Callable | None = None, *, update_phi: bool = True,
           segments=None, n_segments: int = 1, keep: Callable | None = None):
    """One regularized EM iteration (ARTM eq. 14-16): ``(L, R, Φ_new, Θ_new, finite, empty_phi,
    empty_theta)`` with ``Φ_new = normalize((Φ ⊙ ∇_Φ(L + R))₊)`` (per block of rows with
    ``segments``; Φ itself when ``update_phi`` is False) and ``Θ_new = normalize((Θ ⊙ ∇_Θ(L + R))₊)``.

    ``finite`` is False when L, R or a count was not finite: the positive part would silently
    turn a NaN column into zeros (a removed topic), so the drivers stop on it instead (such a
    column of Φ_new or Θ_new is zeros).  ``empty_phi`` (``(n_segments, T)``; ``None`` when
    ``update_phi`` is False) and ``empty_theta`` (``(D,)``) flag the columns (blocks of rows) of
    Φ_new and Θ_new that are zeros: no positive finite mass was left (ARTM Notes 1-2).

    Both come from the column sums that normalise, never from another pass over the counts or
    over Φ_new, Θ_new: XLA fuses ``x ⊙ ∇(L + R)`` into each of its consumers, so any other
    reduction re-reads the old Φ and Θ, and in a fit's loop, where the new Φ and Θ are written
    over the old ones (the state is donated), it then keeps a copy of both (12.6 MB of a 48 MB
    step on 20 Newsgroups at T = 100; ``tests/core/test_em.py`` checks the step's memory).
    """
    ll, r, a_phi, a_theta = regularized_counts(loglik, phi, theta, penalty, update_phi=update_phi, keep=keep)
    new_theta, empty_theta, finite = _normalize_checked(a_theta, None, 1)
    finite = finite & jnp.isfinite(ll) & jnp.isfinite(r)
    new_phi, empty_phi = phi, None
    if update_phi:
        new_phi, empty_phi, finite_phi = _normalize_checked(a_phi, segments, n_segments)
        finite = finite & finite_phi
    return ll, r, new_phi, new_theta, finite, empty_phi, empty_theta[0]


@jax.custom_vjp
def _counts_ll(phi, theta, n_phi, n_theta):
    return (jnp.sum(n_phi * jnp.log(jnp.maximum(phi, EPS))) + jnp.sum(n_theta * jnp.log(jnp.maximum(theta, EPS))))


def _cl_fwd(phi, theta, n_phi, n_theta):
    return _counts_ll(phi, theta, n_phi, n_theta), (phi, theta, n_phi, n_theta)


def _cl_bwd(res, ct):
    phi, theta, n_phi, n_theta = res
    return (ct * n_phi / jnp.maximum(phi, EPS), ct * n_theta / jnp.maximum(theta, EPS),
            jnp.zeros_like(n_phi), jnp.zeros_like(n_theta))


_counts_ll.defvjp(_cl_fwd, _cl_bwd)


def counts_likelihood(n_phi, n_theta=None) -> Callable:
    """The likelihood of given counts, ``L(Φ, Θ) = Σ n_wt log φ_wt + Σ n_td log θ_td``, whose
    ``x ⊙ ∇L`` (with ``x`` clamped at EPS as :func:`regularized_counts` does) is exactly the counts:
    the M-step of an algorithm that keeps counts rather than data (the online algorithm's running
    n_wt) goes through the same :func:`regularized_counts`."""

    def loglik(phi, theta):
        nt = jnp.zeros_like(theta) if n_theta is None else n_theta
        return _counts_ll(phi, theta, n_phi, nt)

    return loglik

