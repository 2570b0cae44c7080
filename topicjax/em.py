"""One EM driver for the EM family: sparse expected counts, the regularized M-step, and the loop.

The central identity (ARTM Theorem 2, eq. 14-16): for the log-likelihood (ARTM eq. 4)

    L(Φ, Θ) = Σ_d Σ_w n_dw log Σ_t φ_wt θ_td

the E-step counts are gradients,  n_wt = φ_wt ∂L/∂φ_wt  and  n_td = θ_td ∂L/∂θ_td  (eq. 7-8),
so the regularized M-step for any differentiable regularizer R is

    φ_wt ∝ (φ_wt ∂(L + R)/∂φ_wt)_+ ,      θ_td ∝ (θ_td ∂(L + R)/∂θ_td)_+ .

:func:`log_likelihood` is a ``jax.custom_vjp`` function whose forward pass already accumulates both
gradients in one sweep over the non-zeros (gather the rows of Φ and columns of Θ, scatter the
weighted ratios back), so one ``jax.value_and_grad(L + R)`` yields the likelihood, the counts and
the regularizer terms at the price of a single E-step.  Nothing of size D x W is ever built: the
non-zeros are processed in fixed-size chunks by ``lax.scan``.

The pieces:

* :func:`prepare` turns a :class:`~topicjax.corpus.Corpus` into padded device arrays
  (:class:`DocWordCounts`);
* :func:`init` / :func:`make_step` are the pure ``init(key, ...) -> state`` and
  ``step(state, data, coefs) -> state`` pair for PLSA/ARTM (PLSA is ``regularizer=None``);
* :func:`run` is the shared Python loop (tolerance, maximum iterations, tqdm progress, history)
  used by every EM-type model of the package; :func:`run_scan` is the same loop compiled with
  ``lax.scan`` for a fixed number of iterations, so whole fits can be ``vmap``-ped.

Example
-------
>>> import jax, topicjax as tj
>>> from topicjax import em
>>> corpus, _ = tj.datasets.make_bars(n_docs=50, seed=0)
>>> data = em.prepare(corpus)
>>> state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
>>> step = em.make_step()
>>> state = step(state, data, None)
>>> bool(abs(state.phi.sum(0) - 1).max() < 1e-5)
True
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

__all__ = [
    "DocWordCounts",
    "EMState",
    "prepare",
    "init",
    "expected_counts",
    "log_likelihood",
    "regularized_counts",
    "normalize_columns",
    "make_step",
    "infer_theta",
    "run",
    "run_scan",
    "NumericalError",
]

#: Smallest value a probability is clamped to before a log or a division (float32-safe).
EPS = 1e-30
#: Default number of non-zeros processed per chunk: 16k x 100 topics x 4 bytes = 6.5 MB.
DEFAULT_CHUNK = 16384


class NumericalError(FloatingPointError):
    """Raised when a fit produces non-finite values instead of propagating them silently."""


class DocWordCounts(NamedTuple):
    """Non-zero counts of a corpus on the device, padded into ``(n_chunks, chunk)`` blocks.

    Padding entries have count 0 and ids 0, so they contribute nothing.  Entries are in the
    corpus order (sorted by document), which keeps the scatter into Θ local.
    """

    doc: Int[Array, "C B"]
    word: Int[Array, "C B"]
    count: Float[Array, "C B"]


class EMState(NamedTuple):
    """State of PLSA/ARTM EM.

    ``loglik`` is L(Φ, Θ) of the parameters *before* the last step (it is a by-product of that
    step's E-step), summed with compensation so that it is accurate to float64 level even in
    float32; ``reg`` is the regularizer value at the same point.
    """

    phi: Float[Array, "W T"]
    theta: Float[Array, "T D"]
    loglik: Float[Array, ""]
    reg: Float[Array, ""]
    iteration: Int[Array, ""]


def prepare(corpus, chunk: int | None = None, dtype=jnp.float32) -> DocWordCounts:
    """Move a corpus's non-zeros to the device as padded chunks (see :class:`DocWordCounts`).

    ``chunk`` defaults to ``min(nnz, DEFAULT_CHUNK)`` rounded up to a multiple of 8.
    """
    nnz = corpus.nnz
    if nnz == 0:
        raise ValueError("the corpus has no tokens")
    if chunk is None:
        chunk = min(nnz, DEFAULT_CHUNK)
    chunk = int(-(-chunk // 8) * 8)
    n_chunks = -(-nnz // chunk)
    pad = n_chunks * chunk - nnz

    def block(a, dt):
        a = np.concatenate([np.asarray(a), np.zeros(pad, a.dtype)]) if pad else np.asarray(a)
        return jnp.asarray(a.reshape(n_chunks, chunk), dtype=dt)

    return DocWordCounts(
        doc=block(corpus.doc_ids, jnp.int32),
        word=block(corpus.word_ids, jnp.int32),
        count=block(corpus.counts, dtype),
    )


def init(key, n_words: int, n_docs: int, n_topics: int, *, dtype=jnp.float32) -> EMState:
    """Random initial Φ (columns drawn uniformly then normalised) and uniform Θ.

    Uniform Θ is BigARTM's default; random Φ breaks the topic symmetry.  The result depends on
    ``key`` only (bits can differ between CPU and GPU for the same key).
    """
    phi = jax.random.uniform(key, (n_words, n_topics), dtype=dtype, minval=0.05, maxval=1.0)
    phi = phi / phi.sum(0, keepdims=True)
    theta = jnp.full((n_topics, n_docs), 1.0 / n_topics, dtype=dtype)
    z = jnp.zeros((), dtype)
    return EMState(phi, theta, z, z, jnp.zeros((), jnp.int32))


def _kahan_add(total, comp, x):
    # Compensated summation: `total + comp` carries the running sum to ~2x working precision,
    # so a million float32 log-terms keep the small changes a convergence test looks at.
    y = x - comp
    t = total + y
    return t, (t - total) - y


def expected_counts(
    phi: Float[Array, "W T"],
    theta: Float[Array, "T D"],
    data: DocWordCounts,
    *,
    need_phi: bool = True,
    need_theta: bool = True,
):
    """One sweep over the non-zeros: the log-likelihood and the gradients of L.

    Returns ``(loglik, dL/dphi (W, T) or None, dL/dtheta (T, D) or None)``.  The E-step counts
    are ``phi * dL/dphi`` = n_wt and ``theta * dL/dtheta`` = n_td (ARTM eq. 7-8).
    """
    W, T = phi.shape
    D = theta.shape[1]
    theta_t = theta.T  # rows of Θᵀ are contiguous: the gather per token reads one row
    dtype = phi.dtype

    def body(carry, chunk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = chunk
        rows = phi[w]  # (B, T)
        cols = theta_t[d]  # (B, T)
        p = jnp.maximum(jnp.sum(rows * cols, axis=-1), EPS)
        ll, comp = _kahan_add(ll, comp, jnp.sum(n * jnp.log(p)))
        r = n / p
        if need_phi:
            g_phi = g_phi.at[w].add(r[:, None] * cols)
        if need_theta:
            g_theta = g_theta.at[d].add(r[:, None] * rows, indices_are_sorted=True)
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((), dtype)
    g_phi0 = jnp.zeros((W, T), dtype) if need_phi else jnp.zeros((), dtype)
    g_theta0 = jnp.zeros((D, T), dtype) if need_theta else jnp.zeros((), dtype)
    (ll, comp, g_phi, g_theta), _ = jax.lax.scan(
        body, (z, z, g_phi0, g_theta0), (data.doc, data.word, data.count)
    )
    return ll, (g_phi if need_phi else None), (g_theta.T if need_theta else None)


@jax.custom_vjp
def log_likelihood(phi: Float[Array, "W T"], theta: Float[Array, "T D"], data: DocWordCounts):
    """L(Φ, Θ) = Σ n_dw log Σ_t φ_wt θ_td (ARTM eq. 4), differentiable in Φ and Θ.

    Its gradient is computed in the same sweep as its value (see the module docstring), so
    ``jax.value_and_grad`` costs one E-step.  Probabilities are clamped at ``EPS``.
    """
    return expected_counts(phi, theta, data, need_phi=False, need_theta=False)[0]


def _ll_fwd(phi, theta, data):
    ll, g_phi, g_theta = expected_counts(phi, theta, data)
    return ll, (g_phi, g_theta, data)


def _ll_bwd(res, ct):
    g_phi, g_theta, data = res
    return ct * g_phi, ct * g_theta, jax.tree.map(lambda a: None, data)


log_likelihood.defvjp(_ll_fwd, _ll_bwd)


def regularized_counts(phi, theta, data, regularizer=None, coefs=None):
    """E-step plus regularizer terms of Theorem 2 via one ``jax.value_and_grad``.

    ``regularizer(phi, theta, coefs) -> scalar`` (or ``None`` for PLSA).  Returns
    ``(loglik, reg, A_phi, A_theta)`` with ``A_phi = φ ⊙ ∂(L+R)/∂φ = n_wt + φ ∂R/∂φ`` and
    ``A_theta = n_td + θ ∂R/∂θ`` (eq. 15-16, before the positive part and normalisation).

    Φ and Θ are clamped at ``EPS`` where the gradient is taken, so terms such as
    ``β Σ log φ_wt`` (smoothing, eq. 23) give their finite limit ``φ ∂R/∂φ = β`` at φ = 0
    instead of ``0 · ∞``.
    """
    phi_c = jnp.maximum(phi, EPS)
    theta_c = jnp.maximum(theta, EPS)
    if regularizer is None:

        def objective(p, t):
            ll = log_likelihood(p, t, data)
            return ll, (ll, jnp.zeros((), ll.dtype))

    else:

        def objective(p, t):
            ll = log_likelihood(p, t, data)
            r = jnp.asarray(regularizer(p, t, coefs), ll.dtype)
            return ll + r, (ll, r)

    (_, (ll, r)), (g_phi, g_theta) = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)(phi_c, theta_c)
    return ll, r, phi_c * g_phi, theta_c * g_theta


def normalize_columns(a: Float[Array, "N K"]) -> Float[Array, "N K"]:
    """Column-wise ``a₊ / Σ a₊``; a column with no positive entry becomes all zeros
    (an over-regularized topic or document, ARTM Notes 1-2) instead of NaN."""
    a = jnp.maximum(a, 0)
    s = a.sum(0, keepdims=True)
    return jnp.where(s > 0, a / jnp.where(s > 0, s, 1), 0)


def make_step(regularizer: Callable | None = None, *, update_phi: bool = True, jit: bool = True):
    """Build ``step(state, data, coefs) -> state``: one regularized EM iteration (ARTM eq. 14-16).

    ``regularizer(phi, theta, coefs) -> scalar`` is the combined R of eq. 13 with its
    coefficients in the pytree ``coefs`` (traced: changing them does not recompile, and a grid of
    them can be vmapped).  ``update_phi=False`` keeps Φ fixed (inference for new documents).
    """

    def step(state: EMState, data: DocWordCounts, coefs: Any = None) -> EMState:
        ll, r, a_phi, a_theta = regularized_counts(state.phi, state.theta, data, regularizer, coefs)
        phi = normalize_columns(a_phi) if update_phi else state.phi
        theta = normalize_columns(a_theta)
        return EMState(phi, theta, ll, r, state.iteration + 1)

    return jax.jit(step) if jit else step


def infer_theta(
    phi: Float[Array, "W T"],
    data: DocWordCounts,
    n_docs: int,
    *,
    n_iter: int = 30,
    regularizer: Callable | None = None,
    coefs: Any = None,
) -> Float[Array, "T D"]:
    """Θ of (new) documents with Φ fixed: ``n_iter`` EM iterations of eq. 16 from uniform Θ."""
    T = phi.shape[1]
    theta0 = jnp.full((T, n_docs), 1.0 / T, phi.dtype)
    return _infer_theta(phi, theta0, data, n_iter, regularizer, coefs)


def _infer_theta_impl(phi, theta0, data, n_iter, regularizer, coefs):
    if regularizer is None:

        def body(theta, _):
            _, _, g = expected_counts(phi, theta, data, need_phi=False)
            return normalize_columns(theta * g), None

    else:

        def body(theta, _):
            _, _, _, a_theta = regularized_counts(phi, theta, data, regularizer, coefs)
            return normalize_columns(a_theta), None

    theta, _ = jax.lax.scan(body, theta0, None, length=n_iter)
    return theta


_infer_theta = jax.jit(_infer_theta_impl, static_argnums=(3, 4))


def run(
    step: Callable,
    state,
    *,
    max_iter: int,
    tol: float = 0.0,
    objective: Callable = lambda s: s.loglik,
    minimize: bool = False,
    progress: bool = True,
    desc: str = "EM",
    callback: Callable | None = None,
    check_finite: Callable | None = None,
):
    """The shared EM loop of every EM-type model.

    Calls ``step(state)`` up to ``max_iter`` times and stops early when the relative change of
    ``objective(state)`` falls below ``tol`` (``tol=0`` runs all iterations).  Shows a tqdm bar
    when ``progress``; ``callback(i, state)`` may return a dict of scores, which is recorded.
    With ``minimize=False`` the objective is a likelihood to maximise (EM); with True, a
    criterion to minimise (BIC for GEM).  ``check_finite(state) -> bool`` guards against NaN:
    a False ends the fit with :class:`NumericalError` naming the iteration.

    Returns ``(state, history)``, history being a list of dicts with the objective and scores of
    each iteration.
    """
    from tqdm.auto import tqdm

    history: list[dict] = []
    prev = None
    bar = tqdm(total=max_iter, desc=desc, disable=not progress, leave=False)
    try:
        for i in range(max_iter):
            state = step(state)
            obj = float(objective(state))
            if check_finite is not None and not bool(check_finite(state)):
                raise NumericalError(f"{desc}: non-finite parameters after iteration {i + 1}")
            if not np.isfinite(obj):
                raise NumericalError(f"{desc}: objective is {obj} after iteration {i + 1}")
            rec = {"iteration": i + 1, "objective": obj}
            if callback is not None:
                rec.update(callback(i, state) or {})
            history.append(rec)
            bar.update(1)
            bar.set_postfix(objective=f"{obj:.6g}")
            if prev is not None and tol > 0:
                change = (prev - obj) if minimize else (obj - prev)
                if abs(change) <= tol * max(abs(obj), 1e-30):
                    break
            prev = obj
    finally:
        bar.close()
    return state, history


def run_scan(step: Callable, state, n_iter: int):
    """``n_iter`` steps compiled into one ``lax.scan``; returns ``(state, objective trace)``.

    ``step(state) -> state`` must be a pure JAX function (close over data and coefficients).
    Because the whole fit is one traced computation it can be ``jax.vmap``-ped over coefficients,
    seeds or initial states.
    """

    def body(s, _):
        s = step(s)
        return s, s.loglik

    return jax.lax.scan(body, state, None, length=n_iter)
