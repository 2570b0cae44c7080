"""Evaluation: reference coherence over sliding windows of ordered texts.

:mod:`topicjax.evaluation.coherence` (C_V, C_NPMI, C_UCI, gensim's UMass), the ordered reference
texts they read (:mod:`topicjax.evaluation.reference_texts`) and the window counts
(:mod:`topicjax.evaluation.window_counts`).
"""

from topicjax.evaluation import coherence, reference_texts, window_counts
from topicjax.evaluation.coherence import coherence as reference_coherence
from topicjax.evaluation.reference_texts import ReferenceTexts

__all__ = ["coherence", "reference_texts", "window_counts", "ReferenceTexts", "reference_coherence"]
