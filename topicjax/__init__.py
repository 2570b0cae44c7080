"""topicjax: topic models in JAX.

PLSA and ARTM with regularizers written as plain Python functions (their M-step terms come from
``jax.grad``), parsimonious topic models with a BIC, the theme/topic mixture model, and the LIDA
family of Gibbs samplers, over one immutable sparse :class:`Corpus` and one set of metrics.
"""

from . import datasets, distributed, em, formats, metrics, regularizers, scores, streaming
from .artm import ARTM
from .corpus import Corpus, CorpusError
from .lida import LIDA
from .plsa import PLSA
from .ptm import PTM
from .ttmm import TTMM

__version__ = "0.1.0"

__all__ = ["ARTM", "Corpus", "CorpusError", "LIDA", "PLSA", "PTM", "TTMM", "datasets", "distributed", "em", "formats", "metrics", "regularizers", "scores", "streaming"]
