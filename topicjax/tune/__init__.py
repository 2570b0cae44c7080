"""Differentiable fitting: hypergradients of validation objectives with respect to regularization
coefficients, and a tuner that follows them (issue 14).

* :mod:`~topicjax.tune.problem` -- a fit as a pure function of its (log) coefficients;
* :mod:`~topicjax.tune.hypergrad` -- :func:`unrolled` and :func:`implicit` hypergradients;
* :mod:`~topicjax.tune.objectives` -- differentiable validation losses: held-out perplexity by
  document completion, a smooth coherence, a classification loss, and weighted sums;
* :mod:`~topicjax.tune.tuner` -- :func:`tune`: projected gradient steps of an optax optimizer on
  the log coefficients, with history and progress bar;
* :mod:`~topicjax.tune.backend` -- the (pure-JAX) E-step that is differentiated.
"""

from topicjax.tune import objectives
from topicjax.tune.backend import DifferentiableCounts, differentiable
from topicjax.tune.hypergrad import forward, forward_many, implicit, unrolled
from topicjax.tune.objectives import (
           Objective,
           classification,
           coherence,
           heldout_perplexity,
)
from topicjax.tune.problem import Problem, Target, fit, set_coefs, targets_from
from topicjax.tune.tuner import TuneResult, default_optimizer, tune, with_values

__all__ = ["objectives", "DifferentiableCounts", "differentiable", "forward", "forward_many", "implicit",
           "unrolled", "Objective", "classification", "coherence", "heldout_perplexity", "Problem",
           "Target", "fit", "set_coefs", "targets_from", "TuneResult", "default_optimizer", "tune",
           "with_values"]
