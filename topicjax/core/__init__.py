"""The engine shared by the EM family: device layouts, E-step, M-step, the step, the drivers.

* :mod:`~topicjax.core.layout` -- :class:`DocWordCounts`, the padded sliced layout (``prepare``);
* :mod:`~topicjax.core.estep` -- the E-step: ``log_likelihood`` whose gradient is the counts;
* :mod:`~topicjax.core.kernels` -- the fused, multi-threaded C++ E-step used on CPU (XLA FFI);
* :mod:`~topicjax.core.mstep` -- THE M-step ``normalize((x ⊙ ∇(L + R))₊)``;
* :mod:`~topicjax.core.em` -- the EM family's state and step (PLSA, ARTM, offline, sharded);
* :mod:`~topicjax.core.driver` -- one driver (``run``) and one batch driver (``run_many``);
* :mod:`~topicjax.core.errors` -- :class:`NumericalError`; :mod:`~topicjax.core.random` -- seeds;
* :mod:`~topicjax.core.checkpoint` -- checkpoint and resume of every fit;
  :mod:`~topicjax.core.environment` -- the ``TOPICJAX_*`` environment variables.

The other modules (numerics, validation, the online step, sharding, compiled: ``jax.jit`` with the
compiler options of every program topicjax compiles) are internal.
"""

from topicjax.core import checkpoint, driver, em, environment, errors, estep, kernels, layout, mstep, random
from topicjax.core.errors import NumericalError

__all__ = ["NumericalError", "checkpoint", "driver", "em", "environment", "errors", "estep", "kernels", "layout", "mstep",
           "random"]
