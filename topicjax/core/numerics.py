"""Error-free sums for float32 devices: totals of a million log-terms keep the small changes that
decide a convergence test or a switch flip.

* :func:`kahan_add` -- one step of compensated summation (``total + comp`` ~ twice the precision);
* :func:`two_sum` -- Knuth's TwoSum, ``s + e == a + b`` exactly;
* :func:`df_add`, :func:`df_total` -- double-float ("hi + lo", about 48 bits) additions and a
  pairwise total of a vector of double-floats (error ~ ``log2(n) eps² Σ|x|``, 1e-13 relative);
* :func:`compensated_sum` -- a vector's total as a double-float;
* :func:`full_precision` -- float32 matrix products at full float32 precision on every device.

>>> import jax.numpy as jnp
>>> from topicjax.core.numerics import compensated_sum
>>> hi, lo = compensated_sum(jnp.full(1_000_001, 0.1, jnp.float32))
>>> abs(float(hi) + float(lo) - 1_000_001 * float(jnp.float32(0.1))) < 1e-6
True
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp

__all__ = ["EPS", "kahan_add", "two_sum", "df_add", "df_total", "compensated_sum", "full_precision", "MATMUL_PRECISION"]

#: Smallest value a probability is clamped to before a log or a division (float32-safe): the one
#: clamp of the E-step (:mod:`topicjax.core.estep` and the fused kernel of
#: :mod:`topicjax.core.kernels`), the M-step (:mod:`topicjax.core.mstep`) and the regularizers.
EPS = 1e-30

#: The matrix-product precision of every fit: float32 products in float32 (XLA's default on
#: NVIDIA GPUs since Ampere is TF32, a 10-bit mantissa).
MATMUL_PRECISION = "highest"


class _FullPrecision(contextlib.ContextDecorator):
    def __enter__(self):
        self._ctx = jax.default_matmul_precision(MATMUL_PRECISION)
        return self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def full_precision(fn=None):
    """Trace (and so compile) JAX code with float32 matrix products at full float32 precision;
    a context manager (``with full_precision(): ...``) or a decorator (``@full_precision``).

    On GPUs XLA computes float32 ``dot``s in TF32 by default (10 bits of mantissa, ~1e-3 relative
    error): on an H200 one TTMM EM iteration (whose M-step is three matrix products) gave
    parameters 8e-4 (relative) away from the CPU's; with full precision, 1e-6.  The drivers
    (:func:`topicjax.core.driver.run`, :func:`~topicjax.core.driver.run_many`) and the other
    entry points that compile a fit run under it, user regularizers included; the setting is
    JAX's ``jax_default_matmul_precision``, scoped to the call (a JAX trace-context setting, so it
    is part of the compilation cache key).  On CPU it changes nothing.

    >>> import jax.numpy as jnp
    >>> with full_precision():
    ...     float((jnp.ones((2, 3)) @ jnp.ones((3, 2)))[0, 0])
    3.0
    """
    if fn is None:
        return _FullPrecision()

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with _FullPrecision():
            return fn(*args, **kwargs)

    return wrapped


def kahan_add(total, comp, x):
    """Compensated summation: returns the new ``(total, comp)`` after adding ``x``."""
    y = x - comp
    t = total + y
    return t, (t - total) - y


def two_sum(a, b):
    """Knuth's TwoSum: ``s + e == a + b`` exactly (elementwise)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def df_add(a_hi, a_lo, b_hi, b_lo):
    """Double-float addition ``(a_hi + a_lo) + (b_hi + b_lo)``, renormalised (|lo| <= ulp(hi)/2)."""
    s, e = two_sum(a_hi, b_hi)
    e = e + (a_lo + b_lo)
    hi = s + e
    return hi, e - (hi - s)


def df_total(hi, lo):
    """Sum a vector of double-float values ``(hi, lo)`` pairwise: ``(hi, lo)`` scalars."""
    n = hi.shape[0]
    size = 1 << max(0, (n - 1).bit_length())
    hi = jnp.pad(hi, (0, size - n))
    lo = jnp.pad(lo, (0, size - n))
    while hi.shape[0] > 1:
        h = hi.shape[0] // 2
        hi, lo = df_add(hi[:h], lo[:h], hi[h:], lo[h:])
    return hi[0], lo[0]


def compensated_sum(x):
    """The total of a vector as a double-float ``(hi, lo)`` (pairwise, exact per addition)."""
    x = jnp.ravel(x)
    return df_total(x, jnp.zeros_like(x))
