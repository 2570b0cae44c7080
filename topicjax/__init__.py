"""topicjax: topic models in JAX.

PLSA and ARTM with regularizers written as plain Python functions (their M-step terms come from
``jax.grad``), parsimonious topic models with a BIC, the theme/topic mixture model, and the LIDA
family of Gibbs samplers, over one immutable sparse :class:`Corpus` and one set of metrics.

Sub-packages: :mod:`topicjax.data` (corpus, readers, datasets), :mod:`topicjax.core` (layouts,
E-step, M-step, drivers), :mod:`topicjax.regularizers`, one per model family
(:mod:`topicjax.artm`, :mod:`topicjax.ptm`, :mod:`topicjax.ttmm`, :mod:`topicjax.lida`),
:mod:`topicjax.evaluation` (metrics, scores), :mod:`topicjax.scale` (online, distributed),
:mod:`topicjax.tune` (hypergradients of validation objectives, coefficients tuned by gradient),
:mod:`topicjax.persistence` (saving and loading any model), and, imported on demand,
:mod:`topicjax.interop` (gensim, pyLDAvis, OCTIS) and :mod:`topicjax.cli` (the command line).
Each package's ``__all__`` is its public surface; everything else is internal.
``tj.datasets`` and ``tj.metrics`` are short names for ``tj.data.datasets`` and
``tj.evaluation.metrics``.
"""

from topicjax import _malloc

_malloc.limit_arenas()  # before anything starts threads: see topicjax/_malloc.py

from topicjax import artm, core, data, evaluation, lida, persistence, ptm, regularizers, scale, ttmm, tune
from topicjax.artm import ARTM, PLSA
from topicjax.core.errors import NumericalError
from topicjax.data import Corpus, CorpusError, datasets
from topicjax.evaluation import metrics
from topicjax.lida import LIDA
from topicjax.ptm import PTM
from topicjax.ttmm import TTMM

__version__ = "0.1.0"

# the public surface of every package is listed in docs/public_api.md (checked by
# tests/test_public_api.py)
__all__ = ["ARTM", "Corpus", "CorpusError", "LIDA", "NumericalError", "PLSA", "PTM", "TTMM", "artm", "core", "data",
           "datasets", "evaluation", "lida", "metrics", "persistence", "ptm", "regularizers", "scale", "ttmm", "tune"]
