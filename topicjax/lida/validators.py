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

from topicjax.core import compiled, environment
from topicjax.core import validation
from .state import HYPER
from .evaluate import BLOCK

__all__ = ["discount", "hyper_names", "gamma_prior", "topic_slots", "memory_limit", "memory_parts", "memory_needed",
           "check_memory"]


def discount(value, name):
    """A discount σ, ζ of the three-parameter IBP: a number in [0, 1)."""
    v = validation.check_number(value, name, 0.0)
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
        return tuple(validation.check_number(v, name, 0.0, low_open=True) for v in value)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {value!r}") from None


def memory_limit() -> int:
    """Bytes a LIDA fit may plan to hold (:func:`check_memory`): ``TOPICJAX_LIDA_MEMORY`` (bytes),
    by default three quarters of the machine's physical memory."""
    env = environment.memory_limit()  # a number of bytes, or with a unit: 16G, 16GiB
    if env is not None:
        return env
    try:
        return int(0.75 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def topic_slots(value, n_tokens: int, name: str = "n_components") -> int:
    """K_max of LIDA/FTM (the topic slots, a truncation of the unbounded number of topics): at most
    the corpus's tokens.  A topic lives in the sampler only while it holds a token or was born in
    the current sweep, and one token belongs to one topic, so slots beyond the tokens are never
    used; they would only be allocated (count tables of (documents + words) x K_max) and scanned
    (every sweep visits each slot of the activation masks: K_max = 1e5 on a 40-document corpus
    took 43 s for 2 sweeps)."""
    k = validation.check_int(value, name, 1)
    if k > n_tokens:
        raise ValueError(f"{name} must be an integer <= {n_tokens} (the corpus's tokens: every live topic "
                         f"holds at least one token), got {value!r}")
    return k


#: Bytes per token a fit can need while it builds the token stream (:func:`~topicjax.lida.state.make_tokens`:
#: host copies of the stream and of the block layout beside their device copies), with the XLA
#: sweep's lane layout and without it (the compiled kernel's stream: doc and word ids on the host
#: and the device, the initial topics' random draws).
SETUP_PER_TOKEN = 96
SETUP_PER_TOKEN_KERNEL = 24
#: Bytes per token of the transient arrays of one sweep, by mode (new assignments and the sweep's
#: own per-token temporaries: XLA's memory analysis of the compiled sweep gives 4 (compiled CPU
#: kernel), 8.4 (XLA "parallel"), 19 ("exact") and 116 ("stale": its padded per-batch copies)).
SWEEP_PER_TOKEN = {"parallel": 12, "exact": 20, "stale": 120}


def loglik_arrays() -> int:
    """(block x K_max) float32 arrays the training log-likelihood's products hold at once: one
    in the programs compiled with topicjax's options (:mod:`topicjax.core.compiled`: XLA's own
    fusions, XLA's memory analysis and the process's resident memory agree), three with jaxlib's
    defaults on CPU (XLA counts two; YNNPACK's fusions allocate a third beside them)."""
    return 1 if compiled.compiler_options() else 3


def memory_parts(n_tokens: int, n_docs: int, n_words: int, n_topics: int, *, n_rows: int | None = None,
                 mode: str = "parallel", loglik: bool = True, lanes_layout: bool = True, extras: bool = True,
                 word_lists: bool = False) -> dict:
    """The bytes of a LIDA fit, part by part: ``{"held": {...}, "per sweep": {...}, "setup": n}``.

    *Held* for the whole fit: the token stream (document and word ids and the assignments z, 12
    bytes per token; with ``extras`` the five per-token arrays of the stale sweep and the MH
    proposals, 20 more; with ``lanes_layout`` the XLA parallel sweep's block layout, 4 int32 per
    slot with at most 2 slots per token, 32 more: 64 bytes per token with both), the count tables
    (n_dk, n_wk int32 and the masks Θ̄, Φ̄ bool: 5 bytes per cell of (documents + word rows) x
    K_max), the posterior sums and the last sample's means (float32, 8 bytes per cell of (words
    + documents) x K_max) and, with ``word_lists`` (the compiled kernel's sparse LDA draw), its
    lists of each word's topics (an int32 per (word, topic) with a count, at most min(rows x K_max,
    tokens), and 12 bytes per word row).
    *Per sweep*, one at a time beside those: the sweep (a new state beside the old one and its
    temporaries, 12 bytes per cell and :data:`SWEEP_PER_TOKEN`), the hyperparameter update (a new
    state and its count histograms: 10 per cell, and 20 per token where the histograms are taken
    over the tokens, else 4), the posterior means (5 per cell of (words + documents) x K_max) and,
    every ``eval_every`` sweeps (``loglik``), the training log-likelihood over the token stream,
    whose products φ_w θ_d of one block of :data:`~topicjax.lida.evaluate.BLOCK` tokens take
    :func:`loglik_arrays` (block x K_max) float32 arrays and 64 bytes per token of the block (XLA
    counts 60: its slices of the stream, the sums, their logarithms), beside the posterior means it
    reads.  *Setup*: :data:`SETUP_PER_TOKEN` (:data:`SETUP_PER_TOKEN_KERNEL` without the
    lane layout) while the token stream is built, before the rest.
    The coefficients are XLA's own counts (``compiled.memory_analysis()``) of the compiled
    programs, rounded up; ``tests/lida/test_lida_limits.py`` compares the total with both those
    counts and the peak resident memory of a fit.  ``n_rows``: word rows
    (observed words plus the infinite vocabulary's phantom rows; default ``n_words``)."""
    N, D, W, K = int(n_tokens), int(n_docs), int(n_words), int(n_topics)
    R = W if n_rows is None else int(n_rows)
    block = max(1, min(BLOCK, N))
    dr, wd = (D + R) * K, (W + D) * K
    held = {"token stream": (12 + 20 * bool(extras) + 32 * bool(lanes_layout)) * N, "count tables": 5 * dr + 8 * K,
            "posterior sums": 8 * wd}
    if word_lists:
        held["word lists"] = 4 * min(R * K, N) + 12 * R
    # the α/β count histograms gather one count per token only where the table has more cells
    # (hyper._by_tokens); otherwise the update's per-token part is its copy of z
    per_token_hyper = 20 if max(D, R) * K > N else 4
    per_sweep = {"sweep": 12 * dr + SWEEP_PER_TOKEN[mode] * N, "hyperparameter update": 10 * dr + per_token_hyper * N,
                 "posterior means": 5 * wd,
                 "log-likelihood products": (4 * loglik_arrays() * (K + 1) + 64) * block + 5 * wd if loglik else 0}
    setup = SETUP_PER_TOKEN if lanes_layout else SETUP_PER_TOKEN_KERNEL
    return {"held": held, "per sweep": per_sweep, "setup": setup * N}


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def memory_needed(n_tokens: int, n_docs: int, n_words: int, n_topics: int, **kwargs) -> int:
    """Bytes a fit needs at its peak (:func:`memory_parts`: what is held plus the largest part of a
    sweep, or the setup if that is more)."""
    parts = memory_parts(n_tokens, n_docs, n_words, n_topics, **kwargs)
    return max(parts["setup"], sum(parts["held"].values()) + max(parts["per sweep"].values()))


def check_memory(corpus, n_topics: int, **kwargs) -> None:
    """Refuse, before allocating, a fit whose arrays (:func:`memory_needed`, growing with the
    number of tokens: a Gibbs sampler keeps every token's topic) exceed :func:`memory_limit`.
    ``kwargs``: ``n_rows``, ``mode``, ``loglik``, ``lanes_layout``, ``extras``, ``word_lists`` of
    :func:`memory_parts`."""
    sizes = (corpus.n_tokens, corpus.n_docs, corpus.n_words, n_topics)
    need, limit = memory_needed(*sizes, **kwargs), memory_limit()
    if need > limit:
        parts = memory_parts(*sizes, **kwargs)
        name, largest = max({**parts["held"], **parts["per sweep"], "token stream setup": parts["setup"]}.items(),
                            key=lambda kv: kv[1])
        hint = {"log-likelihood products": "set eval_every=0 to skip them, ", "token stream": "",
                "token stream setup": ""}
        raise ValueError(f"LIDA on this corpus ({corpus.n_tokens:,} tokens, {corpus.n_docs:,} documents, "
                         f"{corpus.n_words:,} words, K_max={n_topics}) needs about {_size(need)}, more than the "
                         f"limit of {_size(limit)} (TOPICJAX_LIDA_MEMORY, default 3/4 of the physical "
                         f"memory; the largest part: the {name}, {_size(largest)}); a Gibbs sampler keeps one "
                         f"topic per token: {hint.get(name, 'lower n_components, ')}subsample the corpus, or raise "
                         "the limit")
