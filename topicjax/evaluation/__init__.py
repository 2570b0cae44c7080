"""Evaluation: metrics on fitted matrices and per-iteration scores."""

from topicjax.evaluation import metrics, scores

__all__ = ["metrics", "scores"]
