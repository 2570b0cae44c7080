"""The engine shared by every EM-type model: device layouts, E-step, M-step, drivers."""

from topicjax.core import em, kernels

__all__ = ["em", "kernels"]
