"""ARTM (additive regularization) and PLSA, its unregularized special case."""

from topicjax.artm.model import ARTM
from topicjax.artm.plsa import PLSA
from topicjax.artm.trajectories import paper_trajectory, table1_regularizers

# the coefficient schedules (Step, Linear, ...) live in topicjax.regularizers, their one home
__all__ = ["ARTM", "PLSA", "paper_trajectory", "table1_regularizers"]
