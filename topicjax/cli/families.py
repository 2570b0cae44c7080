"""The model families the command line fits, their options, and ARTM regularizers from text.

Every option maps to one constructor parameter of an estimator and is passed only when given, so
the estimator's own defaults and its own validation messages apply (``--iterations 0`` is refused
by the estimator, with ``max_iter``'s message and the option named).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass

from topicjax import regularizers as R
from topicjax.artm.trajectories import paper_trajectory
from topicjax.regularizers import REGISTRY, Step

__all__ = ["FAMILIES", "OPTIONS", "add_model_options", "build_model", "parse_regularizer", "regularizers_from_args",
           "option_for", "model_class"]


@dataclass(frozen=True)
class Option:
    flag: str
    param: str  # the estimator's parameter
    kwargs: dict


#: command-line option -> estimator parameter (the common ones first)
OPTIONS = (
    Option("--topics", "n_components", dict(type=int, help="number of topics (10 for bars, else 20; LIDA/FTM: the "
                                                           "initial number of topic slots)")),
    Option("--iterations", "max_iter", dict(type=int, help="iterations (EM passes, GEM iterations, SGD epochs or "
                                                           "Gibbs sweeps; default 300 for PLSA/ARTM on bars, 100 "
                                                           "on other corpora, else the estimator's)")),
    Option("--tol", "tol", dict(type=float, help="stop when the relative change of the objective is below this")),
    Option("--seed", "random_state", dict(type=int, default=0, help="random seed (default 0)")),
    Option("--background", "background_topics", dict(type=int, help="ARTM: the last B topics are background")),
    Option("--label-weight", "label_weight", dict(type=float, help="ARTM: weight of the class modality (labels of "
                                                                   "the corpus as classes, Theorem 3)")),
    Option("--doc-passes", "doc_passes", dict(type=int, help="ARTM: BigARTM's offline pass with K inner Θ "
                                                             "iterations")),
    Option("--bic", "bic", dict(help="PTM: the BIC, 2014 (eq. 26), 2014-exact or 2020")),
    Option("--themes", "n_themes", dict(type=int, help="TTMM: number of themes J (default 10)")),
    Option("--solver", "solver", dict(help="TTMM: em (default) or sgd")),
    Option("--batch-size", "batch_size", dict(type=int, help="TTMM: documents per SGD minibatch")),
    Option("--tokens-per-block", "tokens_per_block", dict(type=int, help="LIDA: tokens per block of documents of "
                                                                         "the parallel sampler")),
    Option("--variant", "variant", dict(help="LIDA: lida (default), ftm, sstm or lda")),
    Option("--sampler", "sampler", dict(help="LIDA: the sampler, parallel (default), exact or stale")),
    Option("--burn-in", "burn_in", dict(type=int, help="LIDA: sweeps before posterior averaging")),
)


def option_for(param: str) -> str | None:
    """The command-line option of an estimator parameter (for messages)."""
    return next((o.flag for o in OPTIONS if o.param == param), None)


@dataclass(frozen=True)
class Family:
    name: str
    module: str
    cls: str
    about: str


FAMILIES = {
    "plsa": Family("plsa", "topicjax.artm", "PLSA", "PLSA by EM (ARTM Theorem 1)"),
    "artm": Family("artm", "topicjax.artm", "ARTM", "ARTM with regularizers (--reg, --trajectory)"),
    "ptm": Family("ptm", "topicjax.ptm", "PTM", "parsimonious topic model by GEM, BIC (--bic)"),
    "ttmm": Family("ttmm", "topicjax.ttmm", "TTMM", "theme/topic mixture (--themes, --solver)"),
    "lida": Family("lida", "topicjax.lida", "LIDA", "LIDA/FTM/SSTM/LDA Gibbs samplers (--variant, --sampler)"),
}


def model_class(name: str):
    import importlib

    if name not in FAMILIES:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(FAMILIES)}")
    fam = FAMILIES[name]
    return getattr(importlib.import_module(fam.module), fam.cls)


def add_model_options(p: argparse.ArgumentParser, *, regularizers: bool = True) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default="plsa",
                   help="; ".join(f"{k}: {f.about}" for k, f in FAMILIES.items()) + " (default plsa)")
    for o in OPTIONS:
        g.add_argument(o.flag, dest=o.param, **{"default": None, **o.kwargs})
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
        return [(R.decorrelate(), 10.0), (R.sparse_theta(), Step(start, 0.05))]
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
    for o in OPTIONS:
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
