"""The theme/topic mixture model (TTMM): exact log-space EM and minibatch SGD."""

from topicjax.ttmm.model import TTMM, random_params, sample_corpus, synthetic_params

__all__ = ["TTMM", "random_params", "sample_corpus", "synthetic_params"]
