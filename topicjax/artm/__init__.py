"""ARTM (additive regularization) and PLSA, its unregularized special case."""

from topicjax.artm.model import ARTM, ARTMState, Linear, Step, paper_trajectory, table1_regularizers
from topicjax.artm.plsa import PLSA

__all__ = ["ARTM", "ARTMState", "Linear", "PLSA", "Step", "paper_trajectory", "table1_regularizers"]
