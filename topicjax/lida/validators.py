"""Validators of the LIDA estimator's own parameters (:mod:`topicjax.core.validation` shape:
``check(value, name) -> value`` or ``ValueError("<name> must be ..., got <value>")``).

>>> discount(0.5, "sigma")
0.5
>>> discount(1.0, "sigma")
Traceback (most recent call last):
...
ValueError: sigma must be a number in [0, 1), got 1.0
"""

from __future__ import annotations

from topicjax.core import validation as V
from .state import HYPER

__all__ = ["discount", "hyper_names", "gamma_prior"]


def discount(value, name):
    """A discount σ, ζ of the three-parameter IBP: a number in [0, 1)."""
    v = V.check_number(value, name, 0.0)
    if v >= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return v


discount.accepts = "a number in [0, 1)"


def hyper_names(value, name):
    """Names of hyperparameters (``fixed_hyper``): a list or tuple of names of ``HYPER``."""
    what = f"a list of names among {', '.join(repr(h) for h in HYPER)}"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    for h in value:
        if h not in HYPER:
            raise ValueError(f"{name} must be {what}, got {value!r} (unknown hyperparameter {h!r})")
    return tuple(value)


def gamma_prior(value, name):
    """(shape, rate) of a Gamma prior: two finite numbers > 0."""
    what = "a pair (shape, rate) of finite numbers > 0"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name} must be {what}, got {value!r}")
    try:
        return tuple(V.check_number(v, name, 0.0, low_open=True) for v in value)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {value!r}") from None
