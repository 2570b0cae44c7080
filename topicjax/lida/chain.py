"""LIDA's algorithm module: a chain of Algorithm 1 (sec. 4) as the one driver runs it.

The names every family's algorithm module has: :class:`State` (a chain between sweeps),
:func:`init`, :func:`step` (one sweep of eq. (35)-(38) with its topic and word activations, the
hyperparameter updates, the posterior sums and the sweep's record) and :data:`ALGORITHM`, the
:class:`~topicjax.core.driver.HostAlgorithm` that :func:`topicjax.core.driver.run_host` runs:
a chain changes its shapes between sweeps (K_max doubles when a topic is born with no free slot,
the phantom rows of the infinite vocabulary likewise), so its step runs on the host around
compiled sweeps, not as a fixed-shape compiled :class:`~topicjax.core.driver.Algorithm`.
``LIDA.fit`` is ``init`` then ``run_host(ALGORITHM, ...)``.

The settings of a fit are :class:`Static` (hashable); its data are :class:`Args` (the tokens,
the chain's keys and the corpus, whose sizes the memory check of a growth reads).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver
from topicjax.core.compiled import jit
from topicjax.core.numerics import compensated_sum
from .evaluate import Averages, _loglik_parts, _means_cfg, _sample_means, accumulate_sample, collapsed_terms
from .hyper import histograms, hyper_step
from .sampler import sweep
from .state import HYPER, Config, Tokens, canonical, grow_state, init_state
from .state import State as SamplerState
from .validators import check_memory

__all__ = ["State", "Static", "Args", "init", "step", "ALGORITHM", "to_host", "from_host"]


class State(NamedTuple):
    """A chain between sweeps: the sampler state (:class:`topicjax.lida.state.State`) and its
    configuration (K_max and the phantom rows grow), the posterior sums (``None`` before the
    burn-in ends) and the hyperparameter trace (one list per hyperparameter, one value per sweep)."""

    state: SamplerState
    cfg: Config
    avg: Averages | None
    trace: dict


class Static(NamedTuple):
    """A fit's settings: ``grow`` (``"auto"`` or ``"error"``), the first sweep index of the
    posterior averaging (``burn_in``) and of the hyperparameter updates (``hyper_start``),
    ``eval_every`` (0: never record the training likelihood), ``max_iter``, the observed words
    ``n_words`` and ``memory``, the keyword arguments of
    :func:`topicjax.lida.validators.check_memory` as sorted ``(name, value)`` pairs."""

    grow: str
    burn_in: int
    hyper_start: int
    eval_every: int
    max_iter: int
    n_words: int
    memory: tuple


class Args(NamedTuple):
    """A fit's data: the ``tokens`` (:func:`topicjax.lida.state.make_tokens`), the chain's key and
    the hyperparameters' key (each sweep's keys are folded from them and the sweep's index, so a
    resumed chain draws what the uninterrupted one draws) and the training ``corpus``."""

    tokens: Tokens
    key: object
    hyper_key: object
    corpus: object


#: ``jax.random.fold_in`` compiled once (a sweep's key from the chain's key and its index)
_fold_in = jit(jax.random.fold_in)

#: positions in the record vector of :func:`_post`: the hyperparameters (in :data:`HYPER` order),
#: the objective as a double-float, the live topics, then (evaluated sweeps) the training
#: log-likelihood as a double-float
_OBJ, _LIVE, _LL = len(HYPER), len(HYPER) + 2, len(HYPER) + 3


def _post(state: SamplerState, k_hyp, it: int, tokens: Tokens, cfg: Config, hyper: bool):
    """Everything of sweep ``it`` after its tokens that the record needs, one compiled program:
    the hyperparameters (when ``hyper``; their key folded from ``k_hyp`` and ``it`` inside), the
    objective (:func:`~topicjax.lida.evaluate.collapsed_loglik`) and the live topics.  The count
    histograms are taken once, for the α and β updates and the objective.  Returns the new state
    and the record vector (float32: see :data:`_OBJ`), which the host fetches once."""
    cfg = canonical(cfg)
    if not hyper:
        cfg = replace(cfg, sample=(), eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0))
    if "alpha" not in cfg.sample:  # the objective reads the histogram of n_vk only
        cfg = replace(cfg, max_doc_len=0)
    hyper, rec = _post_jit(state, k_hyp, np.int32(it), tokens, cfg)
    return state._replace(**hyper), rec


@partial(jit, static_argnames=("cfg",))
def _post_jit(state, k_hyp, it, tokens, cfg):
    # the hyperparameters alone come back: returning the state would copy its tables
    h_dk, h_wk = histograms(state, cfg, tokens)
    if cfg.sample:
        state = hyper_step(jax.random.fold_in(k_hyp, it), state, cfg, tokens, (h_dk, h_wk))
        # the objective reads the hyperparameters as stored: XLA would otherwise recompute β's
        # exp inside the objective's fusions, where its last bit can differ (and Wβ's log-gamma
        # with it, 0.03 per topic at β ~ 10^3 in float32)
        stored = jax.lax.optimization_barrier(tuple(getattr(state, h) for h in HYPER))
        state = state._replace(**dict(zip(HYPER, stored)))
    hi, lo = compensated_sum(collapsed_terms(state, cfg, h_wk))
    live = jnp.sum(state.n_k > 0, dtype=jnp.int32)
    rec = jnp.stack([*(jnp.asarray(getattr(state, h), jnp.float32) for h in HYPER), hi, lo, live.astype(jnp.float32)])
    return {h: getattr(state, h) for h in HYPER if h in cfg.sample}, rec


@partial(jit, static_argnames=("cfg",))
def _evaluate_jit(state, rec, tokens, cfg):
    """The record vector with the training log-likelihood of the sample's means appended."""
    phi, theta, _ = _sample_means(state, cfg, tokens.n_d)
    hi, lo = _loglik_parts(phi, theta, tokens.doc, tokens.word)
    return jnp.concatenate([rec, jnp.stack([hi, lo])])


def init(key, tokens: Tokens, cfg: Config, hyper: dict, init_topics: int, theta_init=None) -> State:
    """The chain before its first sweep: :func:`topicjax.lida.state.init_state` (random or IBP
    initial assignment), no posterior sums, empty traces.

    >>> import topicjax as tj
    >>> from topicjax.core import driver
    >>> from topicjax.core.random import as_key
    >>> from topicjax.lida import chain
    >>> from topicjax.lida.state import HYPER, make_tokens
    >>> corpus = tj.datasets.make_bars(n_docs=20, seed=0).corpus
    >>> model = tj.LIDA(3, variant="lda", max_iter=4, progress=False)
    >>> tokens = make_tokens(corpus, block_tokens=corpus.n_tokens, extras=False, lanes_layout=False)
    >>> cfg = model._config(corpus, 3, corpus.n_words)
    >>> k_init, k_hyp, key = jax.random.split(as_key(0), 3)
    >>> c0 = chain.init(k_init, tokens, cfg, {h: getattr(model, h) for h in HYPER}, 3)
    >>> static = chain.Static("error", 2, 1, 0, 4, corpus.n_words, ())
    >>> c, history = driver.run_host(chain.ALGORITHM, c0, args=chain.Args(tokens, key, k_hyp, corpus),
    ...                              static=static, max_iter=4, progress=False)
    >>> len(history), c.avg is not None
    (4, True)
    """
    return State(init_state(key, tokens, cfg, hyper, init_topics, theta_init), cfg, None, {h: [] for h in HYPER})


def zero_sums(cfg: Config) -> Averages:
    """Posterior sums of a chain's configuration, all zero (host zeros transferred: ``jnp.zeros``
    compiles a program per shape)."""
    K = cfg.n_topics
    put = jax.device_put
    return Averages(put(np.zeros((cfg.n_words, K), np.float32)), put(np.zeros((cfg.n_docs, K), np.float32)),
                    put(np.zeros((K,), np.int32)))


def _grow_sums(avg: Averages, cfg: Config) -> Averages:
    dk = cfg.n_topics - avg.n.shape[0]
    return Averages(jnp.pad(avg.phi_sum, ((0, 0), (0, dk))), jnp.pad(avg.theta_sum, ((0, 0), (0, dk))),
                    jnp.pad(avg.n, (0, dk)))


def step(chain: State, iteration: int, args: Args, static: Static) -> tuple[State, dict]:
    """Sweep ``iteration`` (1, 2, ...): the tokens (growing K_max or the phantom rows when a sweep
    runs out of them, doubling; with ``grow="error"`` a :class:`ValueError` naming what ran out),
    the hyperparameters from sweep index ``hyper_start`` on, the posterior sums from ``burn_in``
    on, and the record: ``objective`` (the collapsed log-likelihood), ``n_topics`` (topics holding
    tokens) and, every ``eval_every`` sweeps and at the last, ``log_likelihood`` and
    ``perplexity`` of the training tokens under the sample's means.

    Raises :class:`ValueError` when a growth would pass the memory limit
    (:func:`topicjax.lida.validators.check_memory`)."""
    state, cfg, avg, trace = chain
    tokens, key, k_hyp, corpus = args
    W = static.n_words
    memory = dict(static.memory)
    it = iteration - 1  # the sweep's index: its key is folded from it, so a resumed chain draws the same
    k_it = _fold_in(key, it)
    while True:
        # without activations nothing can overflow, so the old state is not needed
        new = sweep(state, k_it, tokens, cfg, donate=not (cfg.focused or cfg.sparse))
        if not (cfg.focused or cfg.sparse):
            break
        of_t, of_w = (int(x) for x in jax.device_get((new.overflow_topics, new.overflow_words)))
        if of_t == 0 and of_w == 0:
            break
        what = (f"{of_t} new topic(s) found no free slot among K_max={cfg.n_topics}" if of_t
                else f"{of_w} new word(s) found no free phantom row among {cfg.n_rows - W}")
        if static.grow == "error":
            raise ValueError(f"sweep {it}: {what}; raise n_components / n_phantom or use grow='auto'")
        grown = {"n_topics": 2 * (cfg.n_topics + of_t) if of_t else None,
                 "n_rows": W + 2 * (cfg.n_rows - W) + of_w if of_w else None}
        try:  # before growing
            check_memory(corpus, grown["n_topics"] or cfg.n_topics, **{**memory, "n_rows": grown["n_rows"] or cfg.n_rows})
        except ValueError as e:
            raise ValueError(f"sweep {it}: {what}, and growing: {e}") from None
        state, cfg = grow_state(state, cfg, **grown)
        if avg is not None:
            avg = _grow_sums(avg, cfg)
    state = new
    # one compiled program for the hyperparameters, the objective and the live topics, one for
    # the posterior sums and, every eval_every sweeps, one for the training likelihood: dispatched
    # in turn, their record fetched once
    state, rec = _post(state, k_hyp, it, tokens, cfg, it >= static.hyper_start)
    evaluate = static.eval_every and ((it + 1) % static.eval_every == 0 or it == static.max_iter - 1)
    if it >= static.burn_in:
        avg = accumulate_sample(avg if avg is not None else zero_sums(cfg), state, cfg, tokens.n_d)
    if evaluate:
        rec = _evaluate_jit(state, rec, tokens, _means_cfg(cfg))
    vals = np.asarray(jax.device_get(rec), np.float64)  # the sweep's one wait for the device
    trace = {h: trace[h] + [float(vals[i])] for i, h in enumerate(HYPER)}
    # a topic is live while it holds tokens: an FTM/LIDA slot can stay active in documents
    # (theta_bar) with none, its Φ then the prior alone (issue 45)
    rec = {"objective": float(vals[_OBJ] + vals[_OBJ + 1]), "n_topics": int(vals[_LIVE])}
    if evaluate:
        ll = float(vals[_LL] + vals[_LL + 1])
        rec["log_likelihood"] = ll
        rec["perplexity"] = float(np.exp(-ll / corpus.n_tokens))
    return State(state, cfg, avg, trace), rec


def to_host(chain: State) -> dict:
    """What a checkpoint keeps of a chain (numpy arrays and JSON values; K_max may have grown)."""
    state, cfg, avg, trace = chain
    return {"state": {f: np.asarray(getattr(state, f)) for f in SamplerState._fields},
            "n_topics": int(cfg.n_topics), "n_rows": int(cfg.n_rows), "trace": trace,
            "avg": None if avg is None else {f: np.asarray(getattr(avg, f)) for f in Averages._fields}}


def from_host(host: dict, chain: State, static: Static) -> State:
    """The chain of a checkpoint (:func:`to_host`), its configuration ``chain.cfg`` (the initial
    one) completed with the saved sizes."""
    put = jax.device_put  # transfers: jnp.asarray compiles a program per shape
    state = SamplerState(**{f: put(host["state"][f]) for f in SamplerState._fields})
    cfg = replace(chain.cfg, n_topics=int(host["n_topics"]), n_rows=int(host["n_rows"]))
    avg = None if host["avg"] is None else Averages(**{f: put(host["avg"][f]) for f in Averages._fields})
    return State(state, cfg, avg, {h: list(v) for h, v in host["trace"].items()})


def _health(chain: State, static: Static) -> dict:
    # the record's numbers are checked by the driver; the hyperparameters it does not show
    return {h: chain.trace[h][-1] for h in ("alpha", "beta")}


def _postfix(chain: State, record: dict) -> dict:
    return {"topics": record["n_topics"], "alpha": f"{chain.trace['alpha'][-1]:.3g}"}


#: A LIDA chain for :func:`topicjax.core.driver.run_host` (args :class:`Args`, static :class:`Static`).
ALGORITHM = driver.HostAlgorithm(step=step, health=_health, postfix=_postfix, to_host=to_host, from_host=from_host)
