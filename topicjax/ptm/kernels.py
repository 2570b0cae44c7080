"""The fused C++ kernels of the PTM GEM step (``csrc/ptm_kernel.h``), called from jitted JAX
through XLA FFI, with the pure-JAX versions of :mod:`topicjax.ptm.gem` as the fallback.

Three pieces of a GEM step (2014 sec. 6) run in C++ on CPU:

* :func:`estep_sums` -- the E-step (6): per token ``p = max(Σ_j b_jw a_dj, TINY)``, the
  per-document log-likelihood (5), the ranking derivatives ``s1 = Σ_w n_dw b_jw / p_dw`` and
  ``s2 = Σ_w min(n_dw / p_dw², RATIO_CAP) b_jw²`` (``n_dw (b_jw / p_dw)²``, capped), and ``g_wj = Σ_d (n_dw / p_dw) a_dj``
  (``x_jw = b_jw g_wj`` is (9)).  One pass over each document's non-zeros, then one over each
  word's, which computes each entry's ``p`` again (the same float operations) rather than
  keeping it; ``p`` and ``g`` are sums over a document's active topics only (``M_d`` of them).
* :func:`trial_deltas` -- the exact likelihood changes (31) of every document's candidate
  topic-switch flips (the arithmetic of :func:`topicjax.ptm.bic.v_trial_deltas`: EM steps and
  bracketed Newton steps for the weight of a topic turned on; renormalised or uniform
  proportions for one turned off), with ``s1``, ``s2`` at the same proportions.  Each
  document's tokens are gathered once into a small buffer and all its iterations run there.
* :func:`smallest_negatives` -- the sorted list of the most negative single word-switch flip
  scores that :func:`topicjax.ptm.bic.select_u_flips_2014` takes from ``lax.top_k`` over all
  ``P x N`` switches: a pass that keeps the negative entries and a sort of those (XLA's top_k
  sorts the whole array).  Its output equals top_k's on every entry the caller uses (the
  leading finite negative ones), so the accepted word switches are the same bits either way.

The first two compute in float32 with float64 sums over the rows of a document or word (the XLA
path sums in float32), so their values agree with the XLA path to float32 round-off, not
bitwise; the switches a GEM step chooses from them are the same unless two candidates are tied
to round-off.  Every value is summed by one thread in a fixed order: the results are the same
bits for any number of threads.

Selection, threads and build are those of the E-step kernel (:mod:`topicjax.core.kernels`):
``TOPICJAX_ESTEP=auto|xla|ffi`` (or ``kernels.set_backend``) chooses for all kernels,
``TOPICJAX_THREADS`` / ``kernels.set_threads`` sets the threads, and without a compiled
extension ``auto`` runs the XLA versions with a warning.  Under ``jax.vmap`` (restarts of
:meth:`topicjax.ptm.PTM.fit_many`) the calls run one model after the other.  The FFI calls have no
derivative rules (the GEM step is never differentiated); differentiate the pure-JAX versions.

>>> from topicjax.ptm import kernels
>>> kernels.backend_in_use() in ("ffi", "xla")
True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.core import kernels as core_kernels
from topicjax.ptm.layout import PTMData

__all__ = ["backend_in_use", "estep_sums", "trial_deltas", "smallest_negatives", "T_MAX"]

#: Largest weight of a topic turned on in a trial flip (``t_max`` of ``bic.v_trial_deltas``).
T_MAX = 1.0 - 1e-6


def backend_in_use() -> str:
    """``"ffi"`` when a PTM step traced now runs the C++ kernels, else ``"xla"``."""
    return "ffi" if core_kernels.use_ffi(jnp.float32) else "xla"


def _i32(x):
    return x.astype(jnp.int32)


def _f32(x):
    return x.astype(jnp.float32)


def estep_sums(data: PTMData, B, a, *, tiny: float, cap: float, xla):
    """``(g (N, P), ll (D,), s1 (D, P), s2 (D, P))`` of the E-step at effective topics ``B``
    ``(N, P)`` and proportions ``a`` ``(D, P)`` (zero outside the active topics); ``xla(data, B,
    a)`` is the pure-JAX version with the same contract."""
    if not core_kernels.use_ffi(B.dtype, a.dtype) or B.dtype != jnp.float32:
        return xla(data, B, a)
    N, P = B.shape
    D = a.shape[0]
    f32 = jnp.float32
    shapes = [jax.ShapeDtypeStruct((N, P), f32), jax.ShapeDtypeStruct((D,), f32), jax.ShapeDtypeStruct((D, P), f32),
              jax.ShapeDtypeStruct((D, P), f32)]
    call = jax.ffi.ffi_call("topicjax_ptm_estep", shapes, vmap_method="sequential")
    d, w = data.docs, data.words
    out = call(_f32(B), _f32(a), _i32(d.item), _i32(d.other), _f32(d.count), _i32(w.item), _i32(w.pos),
               tiny=np.float32(tiny), cap=np.float32(cap))
    return tuple(out)


def trial_deltas(data: PTMData, B, a, vv, cand, t_start, *, n_on: int, newton_iters: int, tiny: float, cap: float,
                 xla):
    """Exact likelihood changes of the candidate topic-switch flips of every document and the
    ranking derivatives at ``a``: ``(dl (D, K), t (D, K), variant (D, K) int32, s1 (D, P), s2 (D,
    P))``.  ``vv`` ``(D, P)`` (bool, or nonzero numbers) marks the active topics, ``cand`` ``(D, K)`` the candidates
    (the first ``n_on`` turn a topic on, the others turn one off), ``t_start`` ``(D, K)`` the
    Newton starts; ``xla(data, B, a, vv, cand, t_start)`` is the pure-JAX version."""
    if not core_kernels.use_ffi(B.dtype, a.dtype) or B.dtype != jnp.float32:
        return xla(data, B, a, vv, cand, t_start)
    D, P = a.shape
    K = cand.shape[1]
    f32 = jnp.float32
    shapes = [jax.ShapeDtypeStruct((D, K), f32), jax.ShapeDtypeStruct((D, K), f32),
              jax.ShapeDtypeStruct((D, K), jnp.int32), jax.ShapeDtypeStruct((D, P), f32),
              jax.ShapeDtypeStruct((D, P), f32)]
    call = jax.ffi.ffi_call("topicjax_ptm_trials", shapes, vmap_method="sequential")
    d = data.docs
    vv = vv if vv.dtype == jnp.bool_ else vv != 0  # the kernel reads a bool per switch, not a float
    out = call(_f32(B), _f32(a), vv, _i32(cand), _f32(t_start), _i32(d.item), _i32(d.other), _f32(d.count),
               n_on=np.int64(n_on), newton_iters=np.int64(newton_iters), tiny=np.float32(tiny), cap=np.float32(cap),
               t_max=np.float32(T_MAX))
    return tuple(out)


def smallest_negatives(x, k: int):
    """``(values (k,), indices (k,))`` of the ``k`` smallest entries of the flat ``x`` in
    increasing order, ties by lower index: ``lax.top_k(-x, k)`` negated.  With the C++ kernel
    only the finite negative entries are listed (then value ``+inf``, index 0); the callers use
    the list up to its first entry that is not finite and negative, which is the same either
    way."""
    x = jnp.ravel(x)
    if not core_kernels.use_ffi(x.dtype) or x.dtype != jnp.float32:
        neg, idx = lax.top_k(-x, k)
        return -neg, idx
    call = jax.ffi.ffi_call("topicjax_ptm_smallest",
                            [jax.ShapeDtypeStruct((k,), jnp.float32), jax.ShapeDtypeStruct((k,), jnp.int32)],
                            vmap_method="sequential")
    vals, idx = call(x)
    return vals, idx
