"""Θ with Φ fixed: the regularizer-free building block of inference and of the inner Θ passes.

With Φ held constant, one EM iteration on Θ alone is ARTM eq. 16 without the Φ half of the
E-step (:func:`topicjax.core.estep.log_likelihood_theta`, about half an E-step):

    θ_td ∝ (θ_td ∂(L + R)/∂θ_td)₊ ,

its counts from :func:`topicjax.core.mstep.regularized_counts` and its normalisation from
:func:`topicjax.core.mstep.normalize_columns`.  :func:`theta_passes` runs ``n`` such iterations
with any penalty ``R(Φ, Θ)`` given as a function (``None``: plain EM); it knows nothing of
regularizer objects, so ARTM's step (:mod:`topicjax.artm.algorithm`: BigARTM's offline pass), the
online algorithm (:mod:`topicjax.artm.online`) and the streamed offline fit
(:mod:`topicjax.scale.offline`) pass it their own penalties.  :func:`fold_in` is the plain case
from uniform Θ: the Θ of new documents under a fitted Φ (document completion,
:func:`topicjax.evaluation.metrics.fold_in`).

>>> import jax.numpy as jnp, topicjax as tj
>>> from topicjax.core import foldin, layout
>>> corpus = tj.datasets.make_bars(n_docs=20, seed=0)[0]
>>> phi = jnp.full((corpus.n_words, 3), 1.0 / corpus.n_words)
>>> theta = foldin.fold_in(phi, layout.prepare(corpus), corpus.n_docs, n_iter=5)
>>> theta.shape, bool(abs(theta.sum(0) - 1).max() < 1e-5)
((3, 20), True)
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from topicjax.core import estep, mstep, numerics
from topicjax.core.compiled import jit

__all__ = ["theta_passes", "fold_in"]


def theta_passes(phi, theta, data, penalty: Callable | None, keep: Callable | None, n: int,
                 mask: Callable | None = None):
    """``n`` iterations of ARTM eq. 16 with Φ fixed (half an E-step each).

    Args:
        phi: Φ (W x T), held constant (no gradient flows into it).
        theta: the starting Θ (T x D).
        data: the layout of the documents (:func:`topicjax.core.layout.prepare`, or a layout with
            its own E-step).
        penalty: ``R(phi, theta) -> scalar`` whose Θ-gradient enters the counts, or ``None``.
        keep: the part of R whose terms never empty a column (see
            :func:`topicjax.core.mstep.regularized_counts`), or ``None``.
        n: the number of iterations (static or traced: a ``fori_loop``).
        mask: ``mask(theta) -> theta`` applied after every iteration (removed topics or documents
            stay out), or ``None``.

    Returns:
        Θ after the ``n`` iterations; a column with no positive count becomes zeros.
    """

    def one(_, th):
        a = mstep.regularized_counts(lambda p, t: estep.log_likelihood_theta(p, t, data), phi, th, penalty,
                                     update_phi=False, keep=keep)[3]
        th = mstep.normalize_columns(a)
        return th if mask is None else mask(th)

    return jax.lax.fori_loop(0, n, one, theta)


def _fold_in(phi, data, n_docs: int, n_iter: int):
    T = phi.shape[1]
    theta = jnp.full((T, n_docs), 1.0 / T, phi.dtype)
    return theta_passes(phi, theta, data, None, None, n_iter)


_fold_in_jit = numerics.full_precision(jit(_fold_in, static_argnames=("n_docs", "n_iter")))


def fold_in(phi, data, n_docs: int, *, n_iter: int = 30):
    """Θ (T x ``n_docs``) of the documents of ``data`` with Φ fixed: ``n_iter`` plain EM
    iterations on Θ (ARTM eq. 16, no regularizer) from uniform Θ.

    Args:
        phi: Φ (W x T), a distribution over words per topic.
        data: the layout of the documents (:func:`topicjax.core.layout.prepare`).
        n_docs: the documents of ``data`` (Θ's columns).
        n_iter: the iterations (at least 0).

    Returns:
        Θ, each column a distribution over topics (zeros for a document none of whose words any
        topic gives mass to).

    Raises:
        ValueError: ``n_iter`` or ``n_docs`` negative.
    """
    if int(n_iter) < 0 or int(n_docs) < 0:
        raise ValueError(f"fold_in: n_iter and n_docs must be >= 0, got n_iter={n_iter}, n_docs={n_docs}")
    return _fold_in_jit(phi, data, int(n_docs), int(n_iter))
