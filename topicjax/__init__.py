"""topicjax: topic models in JAX.

PLSA and ARTM with regularizers written as plain Python functions (their M-step terms come from
``jax.grad``), parsimonious topic models with a BIC, the theme/topic mixture model, and the LIDA
family of Gibbs samplers, over one immutable sparse :class:`Corpus` and one set of metrics.

Sub-packages: :mod:`topicjax.data` (corpus, readers, datasets), :mod:`topicjax.core` (layouts,
E-step, M-step, drivers), :mod:`topicjax.regularizers`, one per model family
(:mod:`topicjax.artm`, :mod:`topicjax.ptm`, :mod:`topicjax.ttmm`, :mod:`topicjax.lida`: the
families of the registry, ``topicjax/_families.py``, whose packages and estimator classes
``topicjax`` exports),
:mod:`topicjax.evaluation` (metrics, scores), :mod:`topicjax.scale` (online, distributed),
:mod:`topicjax.tune` (hypergradients of validation objectives, coefficients tuned by gradient),
:mod:`topicjax.persistence` (saving and loading any model), and, imported on demand,
:mod:`topicjax.interop` (gensim, pyLDAvis, OCTIS) and :mod:`topicjax.cli` (the command line).
Each package's ``__all__`` is its public surface; everything else is internal.
``tj.datasets`` and ``tj.metrics`` are short names for ``tj.data.datasets`` and
``tj.evaluation.metrics``.

Every public name is loaded at its first use (``tj.PLSA``, ``from topicjax import Corpus``,
``tj.metrics``), not by ``import topicjax``: the families load JAX, SciPy's sparse matrices and
Equinox, and a script that needs only the corpus or the command line's ``--help`` should not
wait for them.  No model needs scikit-learn (nor the pandas and ``scipy.stats`` that its
``sklearn.base`` brings, 1.2 s of CPU) to be defined or fitted on a Corpus: the estimators'
scikit-learn API is their own (:mod:`topicjax._sklearn_api`), and scikit-learn loads when a
program uses it or gives a model a matrix, which scikit-learn validates
(``tests/test_import_cost.py``).  ``import topicjax`` itself only sets malloc's arenas
(:mod:`topicjax._malloc`).
"""

import importlib
import typing

from topicjax import _families, _malloc

_malloc.limit_arenas()  # before anything starts threads: see topicjax/_malloc.py

__version__ = "0.1.0"

#: the names of ``topicjax`` other than the model families' (theirs come from the registry,
#: :mod:`topicjax._families`): ``name -> (module, attribute or None for the module itself)``
_OWN = {
    "Corpus": ("topicjax.data", "Corpus"), "CorpusError": ("topicjax.data", "CorpusError"),
    "NumericalError": ("topicjax.core.errors", "NumericalError"),
    "datasets": ("topicjax.data.datasets", None), "metrics": ("topicjax.evaluation.metrics", None),
    **{name: (f"topicjax.{name}", None) for name in
       ("core", "data", "evaluation", "persistence", "regularizers", "scale", "tune")},
}


def _lazy_table() -> dict[str, tuple[str, str | None]]:
    """Where each public name lives: :data:`_OWN` and, for every registered family, its package
    and its estimator classes (read from the registry as it is now)."""
    table = dict(_OWN)
    for family in _families.FAMILIES:
        table[family.name] = (family.package, None)
        table.update({m.cls: (family.package, m.cls) for m in family.models})
    return table


# the public surface of every package is listed in docs/public_api.md (checked by
# tests/test_public_api.py; the families' part comes from the registry)
__all__ = sorted(_lazy_table(), key=lambda name: (name[0].islower(), name))

if typing.TYPE_CHECKING:  # what type checkers and the API reference's reader see; never run
    from topicjax import artm, core, data, evaluation, lida, persistence, ptm, regularizers, scale, ttmm, tune
    from topicjax.artm import ARTM, PLSA
    from topicjax.core.errors import NumericalError
    from topicjax.data import Corpus, CorpusError, datasets
    from topicjax.evaluation import metrics
    from topicjax.lida import LIDA
    from topicjax.ptm import PTM
    from topicjax.ttmm import TTMM


def __getattr__(name: str):
    """The public name ``name``, imported at its first use (PEP 562) and kept as an attribute."""
    try:
        module, attr = _lazy_table()[name]
    except KeyError:
        raise AttributeError(f"module 'topicjax' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
