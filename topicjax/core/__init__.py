"""The engine shared by every EM-type model: device layouts, E-step, M-step, drivers."""

from topicjax.core import em

__all__ = ["em"]
