"""Parsimonious topic models (PTM 2014, BIC of 2020): GEM with vmapped switch flips, order selection."""

from topicjax.ptm import bic
from topicjax.ptm.model import PTM, OrderSelection, best_fit, select_order

__all__ = ["PTM", "OrderSelection", "best_fit", "bic", "select_order"]
