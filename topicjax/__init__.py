"""topicjax: topic models in JAX.

PLSA and ARTM with regularizers written as plain Python functions (their M-step terms come from
``jax.grad``), parsimonious topic models with a BIC, the theme/topic mixture model, and the LIDA
family of Gibbs samplers, over one immutable sparse :class:`Corpus` and one set of metrics.
"""

from . import datasets, em, formats, metrics, regularizers, scores
from .artm import ARTM
from .corpus import Corpus, CorpusError
from .lida import LIDA
from .plsa import PLSA
from .ttmm import TTMM

__version__ = "0.1.0"

__all__ = ["ARTM", "Corpus", "CorpusError", "LIDA", "PLSA", "TTMM", "datasets", "em", "formats", "metrics", "regularizers", "scores"]
