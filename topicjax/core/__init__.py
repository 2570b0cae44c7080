"""The engine at the bottom of topicjax: device layout, E-step, M-step, the drivers, errors.

Core imports nothing of topicjax above it (data, regularizers, the families, scale, tune, the
command line: ``tests/test_import_graph.py`` checks it); the families build their algorithms on
it.  Its public names are what a user writing an algorithm of their own calls:

* a layout of the corpus -- :func:`prepare` gives a :class:`DocWordCounts` (the padded sliced
  layout the E-step reads);
* the E-step -- :func:`log_likelihood` ``L(Φ, Θ)`` (ARTM eq. 4), whose gradient *is* the counts
  (``n_wt = φ_wt ∂L/∂φ_wt``, ``n_td = θ_td ∂L/∂θ_td``, eq. 7-8), and :func:`expected_counts`
  (L and both gradients of one sweep);
* the M-step -- :func:`m_step` (``normalize((x ⊙ ∇(L + R))₊)``, eq. 14-16, for any penalty
  ``R(Φ, Θ)``) and :func:`normalize_columns` (the positive part and normalisation);
* the drivers -- an :class:`Algorithm` (pure ``step``, ``objective``, ``record``, ``health``)
  run to its stopping rule by :func:`run`, many fits of it in one compiled call by
  :func:`run_many`, a host-level step (a :class:`HostAlgorithm`) by :func:`run_host`;
* :class:`NumericalError` -- what a fit raises instead of returning non-finite values or an
  empty model.

Every family's algorithm module has the same shape on top of these (a state type ``State``,
``init``, ``step`` and ``ALGORITHM``, the :class:`Algorithm` the driver runs):
:mod:`topicjax.artm.algorithm` (ARTM's regularized EM), :mod:`topicjax.artm.online`,
:mod:`topicjax.ptm.gem`, :mod:`topicjax.ttmm.em`, :mod:`topicjax.ttmm.sgd`, and
:mod:`topicjax.lida.chain`, whose ``ALGORITHM`` is a :class:`HostAlgorithm` (a chain's shapes
change between sweeps).

The modules stay importable by their path and are internal otherwise: ``layout``, ``estep``,
``kernels`` (the fused CPU E-step), ``mstep``, ``foldin`` (Θ with Φ fixed), ``driver``,
``checkpoint``, ``sharding`` (documents over devices), ``errors`` (also :class:`CorpusError
<topicjax.core.errors.CorpusError>`, published as ``topicjax.CorpusError``), ``random``,
``environment``, ``numerics``, ``validation``, ``plain``, ``compiled`` (``jax.jit`` with the
compiler options of every program topicjax compiles), ``jit_cache``.

The names load with their modules at their first use (PEP 562), so that ``import topicjax.core``
(which every module of the package below it triggers) does not import JAX.
"""

import importlib
import typing

from topicjax.core.errors import NumericalError

if typing.TYPE_CHECKING:  # what type checkers and the API reference's reader see; never run
    from topicjax.core.driver import Algorithm, HostAlgorithm, run, run_host, run_many
    from topicjax.core.estep import expected_counts, log_likelihood
    from topicjax.core.layout import DocWordCounts, prepare
    from topicjax.core.mstep import m_step, normalize_columns

__all__ = ["Algorithm", "DocWordCounts", "HostAlgorithm", "NumericalError", "expected_counts", "log_likelihood", "m_step",
           "normalize_columns", "prepare", "run", "run_host", "run_many"]

# the module of each public name loaded at its first use
_LAZY = {"Algorithm": "driver", "HostAlgorithm": "driver", "run": "driver", "run_host": "driver", "run_many": "driver",
         "DocWordCounts": "layout", "prepare": "layout", "expected_counts": "estep", "log_likelihood": "estep",
         "m_step": "mstep", "normalize_columns": "mstep"}


def __getattr__(name: str):
    """The public name ``name``, imported from its module at its first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'topicjax.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"topicjax.core.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
