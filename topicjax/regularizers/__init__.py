"""ARTM regularizers: one protocol (:mod:`~topicjax.regularizers.base`) and the pool of the paper (sec. 4).

A regularizer is any function ``R(phi, theta) -> scalar`` of the stochastic matrices Φ (W x T)
and Θ (T x D) written with ``jax.numpy``; the ARTM driver maximises ``L + Σ_i τ_i R_i`` (eq. 13)
and gets the M-step terms ``φ ∂R/∂φ`` and ``θ ∂R/∂θ`` of Theorem 2 (eq. 15-16) from ``jax.grad``,
so nothing but the criterion has to be written.  Extra data (labels, seed words, document links,
topic subsets, co-occurrence counts) is given to a *factory* that returns the regularizer; the
pool's factories (:func:`smooth_phi` to :func:`label_regularization`, eq. 23-52) are listed by
name in :data:`REGISTRY`.  Everything given as regularizers -- a function, a pair ``(R, tau)``, a
list, a weighted sum -- becomes one :class:`Regularizer` (:func:`as_regularizer`,
:func:`combine`), its coefficients numbers or schedules (:class:`Step`, :class:`Linear`, ...);
a saved model rebuilds pool members with :func:`from_spec`, and :func:`custom` gives data to a
criterion of one's own.  A coefficient must be non-negative (eq. 13), and an unknown topic name or
index is an error raised before any computation.

Example::

    import jax.numpy as jnp, topicjax as tj
    def decorrelate(phi, theta):                   # eq. 30, any differentiable criterion
        s = phi.sum(1)
        return -(jnp.sum(s * s) - jnp.sum(phi * phi))
    tj.ARTM(30, regularizers=[(decorrelate, 1e4), (tj.regularizers.sparse_theta(), 0.5)])

The conventions every regularizer follows (Φ's rows, clamping at EPS, coefficients as traced
values, topic subsets) and the pool with each factory's equation and M-step term:
``docs/guides/internals.md``, "ARTM regularizers: conventions and the pool"; their use:
``docs/guides/artm.md``.
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
