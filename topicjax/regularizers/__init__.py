"""ARTM regularizers: one protocol (:mod:`~topicjax.regularizers.base`) and the pool of the paper (sec. 4).

The signature
-------------
A regularizer is any function ``R(phi, theta) -> scalar`` of the stochastic matrices Φ (W x T)
and Θ (T x D) written with ``jax.numpy``; the ARTM driver maximises ``L + Σ_i τ_i R_i`` (eq. 13)
and gets the M-step terms ``φ ∂R/∂φ`` and ``θ ∂R/∂θ`` of Theorem 2 (eq. 15-16) from ``jax.grad``,
so nothing but the criterion has to be written.  Extra data (labels, seed words, document links,
topic subsets, co-occurrence counts) is given to a *factory* that returns the regularizer::

    import jax.numpy as jnp, topicjax as tj
    def decorrelate(phi, theta):                   # eq. 30, any differentiable criterion
        s = phi.sum(1)
        return -(jnp.sum(s * s) - jnp.sum(phi * phi))
    tj.ARTM(30, regularizers=[(decorrelate, 1e4), (tj.regularizers.sparse_theta(), 0.5)])

Conventions shared by every regularizer:

* Φ has one row per token type of the model: the words of every modality, then, for a model with
  classes (Theorem 3), one row per class (the rows of Ψ).  The driver clamps Φ and Θ at
  :data:`topicjax.core.numerics.EPS` before calling R, so ``log(phi)`` is finite (and ``φ ∂R/∂φ`` of
  ``β log φ`` is exactly β even where φ = 0).  Called directly on matrices with zeros, the log
  terms are ``-inf``.
* The coefficient τ is *not* part of R: it is given beside it, ``(R, tau)``, as a float or a
  schedule, and is a traced value in the compiled step (changing it never recompiles).
* Everything -- a plain function, a pool member, a pair ``(R, tau)``, a list, a weighted sum
  ``2.0 * R1 + R2`` -- is coerced by :func:`as_regularizer` (or :func:`combine`) into ONE type,
  :class:`Regularizer`, a pytree of terms whose data (``params``) and coefficients (schedules,
  :mod:`~topicjax.regularizers.schedules`) are leaves: passed to the compiled step as arguments,
  so large arrays are not baked into the program, refits reuse the compiled code, grids of τ are
  vmapped and fits are differentiable in τ.  Each term has a name for error messages, the rule
  that τ must be non-negative (eq. 13), an optional ``update`` run after every EM pass (μ and Σ of
  the correlated topic model, eq. 38-39; the thresholds of rate-controlled sparsing), and a JSON
  ``spec`` from which :func:`from_spec` rebuilds it when a model is loaded.  Data for a custom
  criterion is given with :func:`custom` ``(fn(phi, theta, data), data)``.
* Every fit path accepts the same: ``ARTM(regularizers=...)``, ``ARTM.fit_many``, ``transform``,
  :func:`topicjax.scale.online.fit_online` and :func:`topicjax.scale.distributed.fit`.
* Topic subsets are given as ``topics=``: ``None`` (all), ``"specific"``, ``"background"``, or a
  list of topic indices or names; they are resolved by :meth:`Regularizer.bind` when the model is
  fitted, and an unknown name or index is an error raised before any computation.

The pool (paper equations; M-step terms with coefficient τ):

=========================  ============  =============================================================
factory                    eq.           M-step term
=========================  ============  =============================================================
:func:`smooth_phi`         23-24         φ: ``+ τ β_w``  (LDA's β when β_w = 1 and τ = β)
:func:`smooth_theta`       23-24         θ: ``+ τ α_t``
:func:`sparse_phi`         25-26         φ: ``- τ c_t β_w``  (c_t = 1, or rate-controlled)
:func:`sparse_theta`       25-26         θ: ``- τ c_d α_t``
:func:`seed_words`         27-28         φ: ``+ τ [w ∈ W_t] / |W_t|``  for t ∈ T_0
:func:`labelled_documents` 27, 29        θ: ``+ τ [t ∈ T_d] / |T_d|``  for d ∈ D_0
:func:`semi_supervised`    27-29         both of the above
:func:`decorrelate`        30-31         φ: ``- τ φ_wt Σ_{s≠t} φ_ws``
:func:`document_links`     32-33         θ: ``+ τ θ_td Σ_c n_dc θ_tc``
:func:`correlated_topics`  36-39         θ: ``- τ Σ_s Σ̃_ts (ln θ_sd - μ_s)``, μ, Σ re-estimated
:func:`improve_coherence`  40-42         φ: ``+ τ Σ_{v≠w} C_wv n_vt``
:func:`improve_coherence`  43            φ: ``+ τ 2 φ_wt Σ_v C_wv φ_vt / Σ_uv C_uv φ_ut φ_vt``
:func:`topic_selection`    (Note 1)      θ: ``- τ (n/|T|) θ_td n_d / n_t``  (small topics die)
:func:`label_regularization` 51-52       ψ: ``+ τ p̂_c ψ_ct n_t / Σ_s ψ_cs n_s``
=========================  ============  =============================================================

Eq. 30 and 32 count every pair twice; the pool halves them so that the M-step is literally eq. 31
and 33 (the issue's example ``decorrelate`` above has twice the pool's gradient).
"""

from topicjax.regularizers.base import (LABELS_MODALITY, REGISTRY, Context, Regularizer, Term, as_regularizer, combine,
                                        custom, from_spec, register)
from topicjax.regularizers.schedules import Constant, Linear, Schedule, Step, Table, as_schedule
from topicjax.regularizers.smoothing import smooth_phi, smooth_theta, sparse_phi, sparse_theta
from topicjax.regularizers.structure import (correlated_topics, decorrelate, document_links, improve_coherence,
                                             topic_selection)
from topicjax.regularizers.supervision import label_regularization, labelled_documents, seed_words, semi_supervised

__all__ = [
    "Context", "Regularizer", "Term", "as_regularizer", "combine", "custom", "register", "from_spec", "REGISTRY",
    "LABELS_MODALITY", "Schedule", "Constant", "Step", "Linear", "Table", "as_schedule",
    "smooth_phi", "smooth_theta", "sparse_phi", "sparse_theta", "seed_words", "labelled_documents", "semi_supervised",
    "decorrelate", "document_links", "correlated_topics", "improve_coherence", "topic_selection",
    "label_regularization",
]
