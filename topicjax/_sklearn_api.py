"""scikit-learn's estimator API without importing scikit-learn (issue 42 items 4 and 5).

``sklearn.base`` loads SciPy's statistics and pandas with it: 1.2 s of CPU (after JAX) in every
new interpreter's first model when :class:`topicjax.estimator.TopicModelBase` derived from
``BaseEstimator`` and ``TransformerMixin``.  :class:`EstimatorAPI` gives the estimators what those
two classes gave them, written to scikit-learn's published conventions ("Developing scikit-learn
estimators": parameters are the constructor's keywords, ``get_params(deep)`` with nested
``<name>__<param>``, ``set_params`` refusing unknown names, ``clone`` building a new object from
``get_params``), so that scikit-learn is imported only where scikit-learn itself is used: its tags
(:meth:`EstimatorAPI.__sklearn_tags__`, read only by scikit-learn's own tools), the
``NotFittedError`` of an unfitted model (:func:`not_fitted`), the validation of a matrix input
(a :class:`~topicjax.data.Corpus` needs none), and its global output configuration once the
user's program has loaded it.

``Pipeline``, ``GridSearchCV``, ``sklearn.base.clone`` and ``check_estimator`` take an estimator
by these methods (duck typing; ``check_estimator`` warns that the class does not derive from
``BaseEstimator``, and its checks pass as they did); what is left out is what only
``BaseEstimator`` subclasses get:
the HTML diagram of a lone model in a notebook (a model shows its text ``repr``) and metadata
routing requests (``set_fit_request``).

This module imports nothing of topicjax.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import sys
from collections import defaultdict
from functools import wraps

__all__ = ["EstimatorAPI", "clone", "not_fitted", "OUTPUTS"]

#: the containers of ``set_output(transform=...)``, as in scikit-learn
OUTPUTS = ("default", "pandas", "polars")
#: the methods whose result ``set_output`` configures (scikit-learn's ``_SetOutputMixin`` wraps
#: the same two)
_WRAPPED = ("transform", "fit_transform")
#: about how many non-blank characters a ``repr`` keeps before it elides its middle (scikit-learn's
#: ``N_CHAR_MAX``)
_REPR_MAX = 700


def not_fitted(message: str) -> Exception:
    """scikit-learn's ``NotFittedError(message)`` (a ``ValueError`` and an ``AttributeError``), for
    ``raise not_fitted(...)``: the very class, so that ``except sklearn.exceptions.NotFittedError``
    and ``check_is_fitted`` users keep catching it.  scikit-learn is imported here, on the error
    path only (a program that raises it either knows the class already or pays once)."""
    from sklearn.exceptions import NotFittedError

    return NotFittedError(message)


def clone(obj):
    """A new unfitted copy of ``obj``, as ``sklearn.base.clone(obj, safe=False)`` makes it.

    An object with ``__sklearn_clone__`` (a scikit-learn estimator) is cloned by it; a dict, list,
    tuple, set or frozenset element by element; an object with ``get_params`` (an estimator) is
    rebuilt as ``type(obj)(**params)``, each parameter cloned by these rules, keeping its
    ``set_output`` configuration; anything else (a class, an array, a regularizer, a callable) is
    deep-copied.

    Raises:
        RuntimeError: the constructor of ``type(obj)`` does not keep a parameter as given (the
            rebuilt object's ``get_params`` differs), which scikit-learn's conventions forbid.
    """
    if hasattr(obj, "__sklearn_clone__") and not isinstance(obj, type):
        return obj.__sklearn_clone__()
    kind = type(obj)
    if kind is dict:
        return {k: clone(v) for k, v in obj.items()}
    if kind in (list, tuple, set, frozenset):
        return kind(clone(v) for v in obj)
    if not hasattr(obj, "get_params") or isinstance(obj, type):
        return copy.deepcopy(obj)
    params = {name: clone(value) for name, value in obj.get_params(deep=False).items()}
    new = kind(**params)
    kept = new.get_params(deep=False)
    for name, value in params.items():
        if kept[name] is not value:
            raise RuntimeError(f"cannot clone {kind.__name__}: its constructor does not keep parameter {name!r} "
                               "as given")
    if hasattr(obj, "_sklearn_output_config"):
        new._sklearn_output_config = copy.deepcopy(obj._sklearn_output_config)
    return new


def _is_nan(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral) and math.isnan(x)


def _output_kind(estimator) -> str:
    """The container ``transform`` returns: the estimator's ``set_output``, else scikit-learn's
    global ``transform_output`` where scikit-learn is loaded (only then can it have been set:
    ``set_config`` / ``config_context``), else ``"default"``."""
    config = getattr(estimator, "_sklearn_output_config", {})
    if "transform" in config:
        return config["transform"]
    get_config = getattr(sys.modules.get("sklearn"), "get_config", None)
    return get_config()["transform_output"] if get_config is not None else "default"


def _container(kind: str, out, X, estimator):
    """``out`` (documents x topics) as a ``kind`` DataFrame with the columns
    ``estimator.get_feature_names_out()`` and, from a pandas input, the input's index (what
    scikit-learn's pandas and polars output adapters make)."""
    columns = [str(c) for c in estimator.get_feature_names_out()]
    if kind == "pandas":
        import pandas as pd

        if isinstance(out, pd.DataFrame):
            out.columns = columns
            return out
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(out, index=index, columns=columns, copy=False)
    if kind == "polars":
        try:
            import polars as pl
        except ImportError:
            raise ImportError(f"set_output(transform='polars') of {type(estimator).__name__} needs polars, which "
                              "is not installed") from None
        if isinstance(out, pl.DataFrame):
            return out.rename(dict(zip(out.columns, columns)))
        return pl.DataFrame(out, schema=columns, orient="row")
    raise ValueError(f"the output of {type(estimator).__name__}.transform must be one of {OUTPUTS}, got {kind!r} "
                     "(set_output(transform=...) or scikit-learn's transform_output)")


def _wrap_output(method):
    """``method`` (``transform`` / ``fit_transform``) returning the container of
    :func:`_output_kind`."""

    @wraps(method)
    def wrapped(self, X, *args, **kwargs):
        out = method(self, X, *args, **kwargs)
        kind = _output_kind(self)
        return out if kind == "default" else _container(kind, out, X, self)

    return wrapped


class EstimatorAPI:
    """The parameters, ``repr``, ``set_output`` and tags of a scikit-learn transformer.

    A subclass lists its parameters as its constructor's keywords and stores each unchanged as the
    attribute of its name (no ``*args``).  ``transform`` and ``fit_transform``, wherever a subclass
    defines them, return what :meth:`set_output` asks for.
    """

    #: read by scikit-learn's meta-estimators: ``transform`` follows ``set_output``
    _sklearn_auto_wrap_output_keys = frozenset({"transform"})

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _WRAPPED:
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, _wrap_output(method))

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The constructor's keyword names, sorted (``self`` and ``**kwargs`` left out).

        Raises:
            RuntimeError: the constructor takes ``*args``."""
        init = cls.__init__
        if init is object.__init__:
            return []
        params = [p for p in inspect.signature(init).parameters.values()
                  if p.name != "self" and p.kind != p.VAR_KEYWORD]
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            raise RuntimeError(f"{cls.__name__}.__init__ takes *args; an estimator's parameters are its "
                               "constructor's named arguments")
        return sorted(p.name for p in params)

    def get_params(self, deep: bool = True) -> dict:
        """``{parameter: value}``; with ``deep``, also ``<name>__<param>`` for every parameter of
        a parameter that has ``get_params`` (a nested estimator)."""
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set parameters (``name=value``, or ``name__param=value`` for a nested estimator's) and
        return ``self``.

        Raises:
            ValueError: a name that is not a parameter, naming it and the valid ones."""
        if not params:
            return self
        valid = self.get_params(deep=True)
        nested: dict[str, dict] = defaultdict(dict)
        for key, value in params.items():
            name, delim, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for estimator {self}. Valid parameters are: "
                                 f"{self._get_param_names()!r}.")
            if delim:
                nested[name][sub] = value
            else:
                setattr(self, name, value)
                valid[name] = value
        for name, sub_params in nested.items():
            valid[name].set_params(**sub_params)
        return self

    def _changed_params(self) -> dict:
        """The parameters that differ from the constructor's defaults (by ``repr``; NaN equals
        NaN; a nested estimator of another class than its default differs)."""
        defaults = {n: p.default for n, p in inspect.signature(type(self).__init__).parameters.items()}

        def changed(name, value):
            default = defaults.get(name, inspect.Parameter.empty)
            if default is inspect.Parameter.empty:
                return True
            if hasattr(value, "get_params") and type(value) is not type(default):
                return True
            return repr(value) != repr(default) and not (_is_nan(value) and _is_nan(default))

        return {k: v for k, v in self.get_params(deep=False).items() if changed(k, v)}

    def __repr__(self) -> str:
        """``Name(param=value, ...)``: the parameters that differ from their defaults, by name
        (scikit-learn's ``print_changed_only``), on one line; a repr of more than ~700 non-blank
        characters keeps its two ends around ``...``."""
        text = f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in sorted(self._changed_params().items()))})"
        if sum(not c.isspace() for c in text) <= _REPR_MAX:
            return text
        half = _REPR_MAX // 2
        return f"{text[:half]}...{text[-half:]}"

    def set_output(self, *, transform: str | None = None):
        """What ``transform`` and ``fit_transform`` return: ``"default"`` (arrays), ``"pandas"``
        or ``"polars"`` (a DataFrame named by :meth:`get_feature_names_out`, with a pandas input's
        index); ``None`` leaves it as it is.  Returns ``self``.

        Raises:
            ValueError: another ``transform``, naming it."""
        if transform is None:
            return self
        if transform not in OUTPUTS:
            raise ValueError(f"set_output: transform must be one of {OUTPUTS} or None, got {transform!r}")
        self._sklearn_output_config = {**getattr(self, "_sklearn_output_config", {}), "transform": transform}
        return self

    def __sklearn_tags__(self):
        """The tags of a scikit-learn transformer (``BaseEstimator`` with ``TransformerMixin``);
        scikit-learn is imported here, by scikit-learn's tools that read them."""
        from sklearn.utils import Tags, TargetTags, TransformerTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=TransformerTags())
