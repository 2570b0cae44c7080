"""Evaluation: metrics on fitted matrices, per-iteration scores, and reference coherence.

* :mod:`topicjax.evaluation.metrics` and :mod:`topicjax.evaluation.scores`: measures on Φ and Θ
  (likelihood, document co-occurrence coherence, kernels...) and the scores recorded while fitting;
* :mod:`topicjax.evaluation.coherence`: C_V, C_NPMI, C_UCI over boolean sliding windows and
  gensim's UMass, read from ordered reference texts (:mod:`topicjax.evaluation.reference_texts`)
  with window counts computed on the device (:mod:`topicjax.evaluation.window_counts`).
"""

from topicjax.evaluation import coherence, metrics, reference_texts, scores, window_counts
from topicjax.evaluation.coherence import coherence as reference_coherence
from topicjax.evaluation.reference_texts import ReferenceTexts

__all__ = ["metrics", "scores", "coherence", "reference_texts", "window_counts", "ReferenceTexts",
           "reference_coherence"]
