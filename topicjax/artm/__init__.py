"""ARTM (additive regularization) and PLSA, its unregularized special case."""

from topicjax.artm.model import ARTM
from topicjax.artm.plsa import PLSA
from topicjax.artm.trajectories import paper_trajectory, table1_regularizers
from topicjax.regularizers.schedules import Linear, Step

__all__ = ["ARTM", "Linear", "PLSA", "Step", "paper_trajectory", "table1_regularizers"]
