"""Parsimonious topic models (PTM 2014, BIC of 2020): GEM with vmapped switch flips, order selection.

* :mod:`~topicjax.ptm.model` -- the :class:`PTM` estimator and the fit as a driver algorithm;
* :mod:`~topicjax.ptm.gem` -- state, E/M-steps, trial flips, one GEM step, initialisation;
* :mod:`~topicjax.ptm.bic` -- the 2014/2020 BICs and their exact changes;
* :mod:`~topicjax.ptm.layout` -- the corpus as document rows and word rows on the device;
* :mod:`~topicjax.ptm.order` -- top-down model-order selection.
"""

from topicjax.ptm.model import PTM, best_fit
from topicjax.ptm.order import OrderSelection, select_order

__all__ = ["PTM", "OrderSelection", "best_fit", "select_order"]
