"""Differentiable fitting: hypergradients of validation objectives with respect to regularization
coefficients, and a tuner that follows them (issue 14).

* :mod:`~topicjax.tune.problem` -- a fit as a pure function of its (log) coefficients;
* :mod:`~topicjax.tune.hypergrad` -- :func:`unrolled` and :func:`implicit` hypergradients;
* :mod:`~topicjax.tune.objectives` -- differentiable validation losses: held-out perplexity by
  document completion (:func:`heldout_perplexity_loss`), a smooth coherence
  (:func:`coherence_loss`), a classification loss (:func:`classification_loss`), and weighted sums;
* :mod:`~topicjax.tune.tuner` -- :func:`tune`: projected gradient steps of an optax optimizer on
  the log coefficients, with history and progress bar;
* :mod:`~topicjax.tune.backend` -- the (pure-JAX) E-step that is differentiated (internal).
"""

from topicjax.tune import objectives
from topicjax.tune.hypergrad import forward, forward_many, implicit, unrolled
from topicjax.tune.objectives import Objective, classification_loss, coherence_loss, heldout_perplexity_loss
from topicjax.tune.problem import Problem, Target, targets_from
from topicjax.tune.tuner import TuneResult, default_optimizer, tune, with_values

__all__ = ["Objective", "Problem", "Target", "TuneResult", "classification_loss", "coherence_loss",
           "default_optimizer", "forward", "forward_many", "heldout_perplexity_loss", "implicit", "objectives",
           "targets_from", "tune", "unrolled", "with_values"]
