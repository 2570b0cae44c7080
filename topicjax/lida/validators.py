"""Validators of the LIDA estimator's own parameters and of the memory a fit would need
(:mod:`topicjax.core.validation` shape:
``check(value, name) -> value`` or ``ValueError("<name> must be ..., got <value>")``).

>>> discount(0.5, "sigma")
0.5
>>> discount(1.0, "sigma")
Traceback (most recent call last):
...
ValueError: sigma must be a number in [0, 1), got 1.0
"""

from __future__ import annotations

import os

from topicjax.core import validation as V
from .state import HYPER

__all__ = ["discount", "hyper_names", "gamma_prior", "memory_limit", "memory_needed", "check_memory"]


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


def memory_limit() -> int:
    """Bytes a LIDA fit may plan to hold (:func:`check_memory`): ``TOPICJAX_LIDA_MEMORY`` (bytes),
    by default three quarters of the machine's physical memory."""
    env = os.environ.get("TOPICJAX_LIDA_MEMORY")
    if env:
        try:
            return int(float(env))
        except ValueError:
            raise ValueError(f"TOPICJAX_LIDA_MEMORY must be a number of bytes, got {env!r}") from None
    try:
        return int(0.75 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def memory_needed(n_tokens: int, n_docs: int, n_words: int, n_topics: int) -> int:
    """Bytes a chain holds, counted from its arrays: per token its topic, document and word
    (int32) and the sweep's uniform and new topic (float32, int32); per document and per word row
    and topic slot the count (int32), the activation (bool) and the posterior sum (float32).
    Twice that: a sweep builds the next state beside the current one."""
    per_token = 5 * 4
    per_cell = 4 + 1 + 4
    return 2 * (n_tokens * per_token + (n_docs + n_words) * n_topics * per_cell)


def check_memory(corpus, n_topics: int) -> None:
    """Refuse, before allocating, a fit whose arrays (:func:`memory_needed`, growing with the
    number of tokens: a Gibbs sampler keeps every token's topic) exceed :func:`memory_limit`."""
    need, limit = memory_needed(corpus.n_tokens, corpus.n_docs, corpus.n_words, n_topics), memory_limit()
    if need > limit:
        raise ValueError(f"LIDA on this corpus ({corpus.n_tokens:,} tokens, {corpus.n_docs:,} documents, "
                         f"{corpus.n_words:,} words, K_max={n_topics}) needs about {need / 2**30:.1f} GiB, more than the "
                         f"limit of {limit / 2**30:.1f} GiB (TOPICJAX_LIDA_MEMORY, default 3/4 of the physical "
                         "memory); a Gibbs sampler keeps one topic per token: subsample the corpus, or raise the limit")
