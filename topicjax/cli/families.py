"""The model families the command line fits, their options, and ARTM regularizers from text.

The families, their ``--model`` names and the options only they have come from the registry,
:mod:`topicjax._families`, read each time a parser is built or a model is made (a family
registered there is fitted by ``topicjax fit --model NAME`` with no change here); the options
every family shares are :data:`COMMON_OPTIONS`.  Every option maps to one constructor parameter of
an estimator and is passed only when given, so the estimator's own defaults and its own
validation messages apply (``--iterations 0`` is refused by the estimator, with ``max_iter``'s
message and the option named).
"""

from __future__ import annotations

import argparse
import json
import re

from topicjax import _families
from topicjax._families import Option

# The regularizer pool and ARTM load JAX: the functions that need them import them, so that the
# parser built from this module's plain data (``topicjax --help``) loads neither.

__all__ = ["COMMON_OPTIONS", "options", "add_model_options", "build_model", "parse_regularizer",
           "regularizers_from_args", "option_for", "model_class"]


#: the options of every family: command-line option -> estimator parameter (a family's own options
#: are in its registry line, :data:`topicjax._families.FAMILIES`)
COMMON_OPTIONS = (
    Option("--topics", "n_components", int, "number of topics (10 for bars, else 20; LIDA/FTM: the initial number "
                                            "of topic slots)"),
    Option("--iterations", "max_iter", int, "iterations (EM passes, GEM iterations, SGD epochs or Gibbs sweeps; "
                                            "default 300 for PLSA/ARTM on bars, 100 on other corpora, else the "
                                            "estimator's)"),
    Option("--tol", "tol", float, "stop when the relative change of the objective is below this"),
    Option("--seed", "random_state", int, "random seed (default 0)"),
)
#: the options whose value is not ``None`` when not given
_DEFAULTS = {"random_state": 0}


def options() -> tuple[Option, ...]:
    """The options of ``topicjax fit``: :data:`COMMON_OPTIONS`, then each registered family's.

    Raises:
        ValueError: the registry gives an option twice or one of the common ones again
            (:func:`topicjax._families.check`).
    """
    _families.check(common=tuple(o.flag for o in COMMON_OPTIONS))
    return COMMON_OPTIONS + _families.options()


def option_for(param: str) -> str | None:
    """The command-line option of an estimator parameter (for messages)."""
    return next((o.flag for o in options() if o.param == param), None)


def model_class(name: str):
    """The estimator class that ``--model name`` fits (importing its family's package).

    Raises:
        ValueError: ``name`` is no registered family's ``--model`` name; the message lists them.
    """
    import importlib

    models = _families.cli_models()
    if name not in models:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(models)}")
    family, model = models[name]
    return getattr(importlib.import_module(family.package), model.cls)


def add_model_options(p: argparse.ArgumentParser, *, regularizers: bool = True) -> None:
    g = p.add_argument_group("model")
    models = _families.cli_models()
    g.add_argument("--model", default="plsa", metavar="{" + ",".join(models) + "}",
                   help="; ".join(f"{k}: {m.about}" for k, (_, m) in models.items()) + " (default plsa)")
    for o in options():
        g.add_argument(o.flag, dest=o.param, default=_DEFAULTS.get(o.param), type=o.type, help=o.help)
    if regularizers:
        add_regularizer_options(g)


def add_regularizer_options(g) -> None:
    g.add_argument("--reg", action="append", default=None, metavar="SPEC",
                   help="ARTM regularizer NAME[=TAU][@START][,key=value...], repeatable; NAME from the pool "
                        "(smooth_phi, smooth_theta, sparse_phi, sparse_theta, decorrelate, topic_selection, ...), "
                        "TAU its coefficient (default 1), @START switches it on at that iteration, keys are the "
                        "factory's (topics=specific, rate=0.1, ...). Example: --reg decorrelate=1e4 "
                        "--reg sparse_theta=0.5@10")
    g.add_argument("--trajectory", choices=("default", "paper", "none"), default="default",
                   help="ARTM: default (without --reg: decorrelation, then Θ sparsing from a third of the "
                        "iterations), paper (the trajectory of ARTM sec. 5: background smoothing, rate-controlled "
                        "sparsing, optional --decorrelation) or none")
    g.add_argument("--sparse-start", type=int, default=None, help="ARTM --trajectory paper: first sparsing iteration")
    g.add_argument("--decorrelation", type=float, default=None,
                   help="ARTM --trajectory paper: decorrelation coefficient γ of the specific topics")


# ------------------------------------------------------------------------ regularizers from text
def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, braces and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


_HEAD = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*(?:=\s*([^@\s]+))?\s*(?:@\s*(\S+))?\s*$")


def parse_regularizer(spec: str):
    """``NAME[=TAU][@START][,key=value...]`` -> ``(regularizer, coefficient)``.

    ``NAME`` is a factory of :data:`topicjax.regularizers.REGISTRY` (``-`` and ``_`` alike), TAU a
    number (default 1), START the first iteration with the coefficient on (a
    :class:`~topicjax.regularizers.Step` schedule, saved with the model), ``key=value`` the
    factory's keywords, values read as JSON when they parse (numbers, lists) and as text
    otherwise.

    >>> reg, tau = parse_regularizer("sparse_theta=0.5@10,topics=specific")
    >>> reg.names, tau
    (('sparse_theta',), Step(start=10, value=0.5, before=0))
    """
    from topicjax import regularizers

    REGISTRY, Step = regularizers.REGISTRY, regularizers.Step
    head, *rest = _split_top_level(spec)
    m = _HEAD.match(head)
    if not m:
        raise ValueError(f"--reg {spec!r}: expected NAME[=TAU][@START][,key=value...]")
    name = m.group(1).replace("-", "_")
    if name not in REGISTRY:
        raise ValueError(f"--reg {spec!r}: unknown regularizer {name!r}; the pool has {', '.join(sorted(REGISTRY))}")
    try:
        tau = float(m.group(2)) if m.group(2) is not None else 1.0
    except ValueError:
        raise ValueError(f"--reg {spec!r}: coefficient {m.group(2)!r} is not a number") from None
    coef = tau
    if m.group(3) is not None:
        try:
            start = int(m.group(3))
        except ValueError:
            raise ValueError(f"--reg {spec!r}: start {m.group(3)!r} is not an iteration number") from None
        coef = Step(start, tau)
    kwargs = {}
    for part in rest:
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--reg {spec!r}: {part!r} is not key=value")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value.strip()
    try:
        reg = REGISTRY[name](**kwargs)
    except TypeError as e:
        raise ValueError(f"--reg {spec!r}: {e}") from None
    return reg, coef


def regularizers_from_args(args, iterations: int) -> list:
    """The ARTM regularizers of ``--reg`` and ``--trajectory`` (every coefficient a number or a
    Step schedule, so the saved model reopens without them)."""
    from topicjax import regularizers
    from topicjax.artm.trajectories import paper_trajectory

    Step = regularizers.Step
    regs = [parse_regularizer(s) for s in (args.reg or [])]
    start = max(1, iterations // 3)
    if args.trajectory == "paper":
        sparse_start = args.sparse_start if args.sparse_start is not None else start
        return paper_trajectory(sparse_start=sparse_start, decorrelation=args.decorrelation) + regs
    if args.sparse_start is not None or args.decorrelation is not None:
        raise ValueError("--sparse-start and --decorrelation belong to --trajectory paper")
    if args.trajectory == "default" and not regs:
        # Decorrelated topics from the start, then Θ sparsing switched on once the topics have formed
        # (a lightly weighted regularization trajectory in the spirit of ARTM sec. 5).
        return [(regularizers.decorrelate(), 10.0), (regularizers.sparse_theta(), Step(start, 0.05))]
    return regs


# ------------------------------------------------------------------------ building an estimator
def build_model(args, *, topics: int, iterations: int | None, progress: bool, extra: dict | None = None):
    """The estimator of ``args.model`` with the options given; an option the family does not
    have is an error naming it."""
    cls = model_class(args.model)
    accepted = set(cls._get_param_names())
    params = {"n_components": topics, "progress": progress}
    if iterations is not None:
        params["max_iter"] = iterations
    for o in options():
        if o.param in ("n_components", "max_iter"):
            continue
        value = getattr(args, o.param, None)
        if value is None:
            continue
        if o.param not in accepted:
            if o.param == "random_state":
                continue
            raise ValueError(f"{o.flag} does not apply to --model {args.model}")
        params[o.param] = value
    if args.model == "plsa":
        params.setdefault("tol", 0.0)  # run the iterations asked for (the bars picture needs them)
    if args.model == "artm":
        params["regularizers"] = regularizers_from_args(args, iterations if iterations is not None else 40)
    elif getattr(args, "reg", None) or getattr(args, "trajectory", "default") != "default":
        raise ValueError(f"--reg and --trajectory are ARTM options, not for --model {args.model}")
    params.update(extra or {})
    if args.model == "lida" and params.get("variant") is None:
        params.pop("variant", None)
    return cls(**{k: v for k, v in params.items() if k in accepted})
