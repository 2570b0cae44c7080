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
compiler options of every program topicjax compiles; jit_cache: the persistent compilation cache)
are internal.

The public modules load at their first use (``topicjax.core.em``, ``from topicjax.core import
driver``), not with the package: :mod:`topicjax.regularizers` needs :mod:`topicjax.core.numerics`
while :mod:`~topicjax.core.em` needs the regularizers, so a package that loaded ``em`` whenever
any of its modules is imported would make ``import topicjax.regularizers`` (or the command line,
which starts there) fail half-way unless something had imported ``topicjax.core`` first.
"""

import importlib

from topicjax.core import errors
from topicjax.core.errors import NumericalError

__all__ = ["NumericalError", "checkpoint", "driver", "em", "environment", "errors", "estep", "kernels", "layout", "mstep",
           "random"]

_MODULES = frozenset(__all__) - {"NumericalError"}


def __getattr__(name: str):
    """The public module ``name``, imported at its first use (PEP 562)."""
    if name not in _MODULES:
        raise AttributeError(f"module 'topicjax.core' has no attribute {name!r}")
    return importlib.import_module(f"topicjax.core.{name}")  # the import makes it an attribute


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
