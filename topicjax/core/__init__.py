"""The engine shared by the EM family: device layouts, E-step, M-step, the step, the drivers.

* :mod:`~topicjax.core.layout` -- :class:`DocWordCounts`, the padded sliced layout (``prepare``);
* :mod:`~topicjax.core.estep` -- the E-step: ``log_likelihood`` whose gradient is the counts;
* :mod:`~topicjax.core.kernels` -- the fused, multi-threaded C++ E-step used on CPU (XLA FFI);
* :mod:`~topicjax.core.mstep` -- THE M-step ``normalize((x ⊙ ∇(L + R))₊)``;
* :mod:`~topicjax.core.em` -- the EM family's state and step (PLSA, ARTM, offline, sharded);
* :mod:`~topicjax.core.driver` -- one driver (``run``) and one batch driver (``run_many``);
* :mod:`~topicjax.core.errors` -- :class:`NumericalError`; :mod:`~topicjax.core.random` -- seeds.
"""

from topicjax.core import driver, em, errors, estep, kernels, layout, mstep, random
from topicjax.core.errors import NumericalError

__all__ = ["NumericalError", "driver", "em", "errors", "estep", "kernels", "layout", "mstep", "random"]
