"""Evaluation: metrics on fitted matrices, per-iteration scores, and reference coherence.

* :mod:`topicjax.evaluation.metrics` and :mod:`topicjax.evaluation.scores`: measures on Φ and Θ
  (likelihood, document co-occurrence coherence, kernels...) and the scores recorded while fitting;
* :mod:`topicjax.evaluation.coherence`: :func:`reference_coherence`, C_V, C_NPMI, C_UCI over
  boolean sliding windows and gensim's UMass, read from ordered reference texts
  (:class:`ReferenceTexts`, :mod:`topicjax.evaluation.reference_texts`) with window counts
  computed on the device (:mod:`topicjax.evaluation.window_counts`, internal).
"""

from topicjax.evaluation import coherence, metrics, reference_texts, scores
from topicjax.evaluation.coherence import reference_coherence
from topicjax.evaluation.reference_texts import ReferenceTexts

__all__ = ["ReferenceTexts", "coherence", "metrics", "reference_coherence", "reference_texts", "scores"]
