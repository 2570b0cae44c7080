"""The E-step that hypergradients differentiate: always the pure-JAX kernel.

Differentiating a fit with respect to its coefficients differentiates the M-step, which uses the
gradient of the log-likelihood; so the E-step's *counts themselves* are differentiated (second
order: reverse mode over the reverse mode of :func:`topicjax.core.estep.log_likelihood`).  The
engine's E-step (:func:`topicjax.core.estep.expected_counts`) supports that: its values come from
the kernel that ``TOPICJAX_ESTEP`` selects (the fused C++ kernel of
:mod:`topicjax.core.kernels` on CPU, which has no derivatives of its own, or the pure-JAX one)
and their derivatives from a ``jax.jvp`` of the pure-JAX kernel.  Under reverse mode that runs
the E-step twice per iteration (the selected kernel for the values, the pure-JAX one for the
residuals of the tangents).

A differentiated fit runs the pure-JAX kernel only, ONCE per iteration for values and
derivatives alike; the selection is made HERE, in one function: :func:`differentiable` wraps the
device layout in :class:`DifferentiableCounts`, a layout that brings its own E-step (the hook of
:func:`~topicjax.core.estep.expected_counts`: a ``data`` with a method ``expected_counts`` is
asked for its counts first), which calls :func:`~topicjax.core.estep.sliced_counts` (or
:func:`~topicjax.core.estep.flat_counts` for a hand-built layout) directly.  Whatever
``TOPICJAX_ESTEP`` says, hypergradients use the XLA kernel (:data:`ESTEP_BACKEND`); the values
are those of the ordinary fit up to float round-off (tested against ``ARTM.fit``).

>>> import jax, jax.numpy as jnp, topicjax as tj
>>> from topicjax.core import estep, layout
>>> from topicjax.tune.backend import differentiable
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=20, seed=0)
>>> data = differentiable(layout.prepare(corpus))
>>> phi = jnp.full((corpus.n_words, 3), 1 / corpus.n_words)
>>> theta = jnp.full((3, corpus.n_docs), 1 / 3)
>>> hvp = jax.grad(lambda p: jnp.sum(jax.grad(estep.log_likelihood)(p, theta, data) ** 2))(phi)
>>> hvp.shape
(25, 3)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from topicjax.core import estep
from topicjax.core.layout import DocWordCounts

__all__ = ["DifferentiableCounts", "differentiable", "engine", "ESTEP_BACKEND"]

#: The E-step kernel hypergradients use, whatever ``TOPICJAX_ESTEP`` selects for ordinary fits.
ESTEP_BACKEND = "xla"


class DifferentiableCounts(NamedTuple):
    """:class:`~topicjax.core.layout.DocWordCounts` (same fields, same layout) whose E-step is
    the pure-JAX kernel, differentiable to any order in reverse mode (see the module docstring).
    ``_replace`` keeps the type, so :func:`~topicjax.core.layout.reweight_docs` keeps the kernel."""

    doc: Any
    word: Any
    count: Any
    piece_doc: Any = None
    mirror: Any = None

    def expected_counts(self, phi, theta, need_phi: bool = True, need_theta: bool = True):
        data = engine(self)
        if data.piece_doc is None:
            return estep.flat_counts(phi, theta, data, need_phi, need_theta)
        # the sliced kernel reads `piece_doc`, never `doc` (see estep.expected_counts)
        return estep.sliced_counts(phi, theta, data._replace(doc=None), need_phi, need_theta)


def differentiable(data) -> DifferentiableCounts:
    """``data`` (a :class:`~topicjax.core.layout.DocWordCounts`) with the differentiable E-step.

    A layout with an E-step of its own (documents sharded over devices) cannot be made
    differentiable here: a clear error."""
    if isinstance(data, DifferentiableCounts):
        return data
    if not isinstance(data, DocWordCounts):
        raise TypeError(f"hypergradients need the local layout of one device (DocWordCounts), got "
                        f"{type(data).__name__}; fit without a mesh to tune coefficients")
    return DifferentiableCounts(*data)


def engine(data) -> DocWordCounts:
    """The inverse of :func:`differentiable`: ``data`` with the engine's E-step again (the kernel
    ``TOPICJAX_ESTEP`` selects; under ``vmap`` the side-by-side kernel of ``ARTM.fit_many``), for
    fits that are not differentiated (:func:`topicjax.tune.hypergrad.forward_many`)."""
    return DocWordCounts(*data) if isinstance(data, DifferentiableCounts) else data
