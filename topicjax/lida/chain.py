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
from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver
from topicjax.core.compiled import jit
from .evaluate import Averages, _loglik_blocks, _loglik_totals, _means_cfg, _sample_means, add_sample, collapsed_terms
from . import kernel
from .hyper import histograms, hyper_step
from .sampler import sweep
from .state import HYPER, Config, Tokens, canonical, grow_state, init_fit_state, init_state
from .state import State as SamplerState
from .validators import check_memory

__all__ = ["State", "Static", "Args", "init", "step", "ALGORITHM", "to_host", "from_host"]


class State(NamedTuple):
    """A chain between sweeps: the sampler state (:class:`topicjax.lida.state.State`) and its
    configuration (K_max and the phantom rows grow), the posterior sums (``None`` before the first
    sweep, zero until ``burn_in``) and the hyperparameter trace (one list per hyperparameter, one
    value per sweep)."""

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


#: positions in the record vector of :func:`_post_jit`: the hyperparameters (in :data:`HYPER`
#: order), the live topics, then the float32 terms of the objective and (fits with ``eval_every``)
#: the block totals of the training log-likelihood, each summed on the host in float64 (a
#: compensated sum on the device compiles a kernel per level of its pairwise tree: 0.8 s of a
#: program's 5 s at XLA's default settings)
_LIVE, _OBJ = len(HYPER), len(HYPER) + 1


def _post(state: SamplerState, avg: Averages, k_hyp, it: int, tokens: Tokens, cfg: Config, *, hyper: bool,
          accumulate: bool, evaluate: bool, loglik: bool):
    """Everything of sweep ``it`` after its tokens, one compiled program for every sweep of a fit:
    the hyperparameters (when ``hyper``; their key folded from ``k_hyp`` and ``it`` inside), the
    objective's terms (:func:`~topicjax.lida.evaluate.collapsed_terms`), the live topics, the
    posterior sums (when ``accumulate``: ``avg`` plus the sample's means, written in place, ``avg``
    donated) and, when ``evaluate``, the block totals of the training log-likelihood of the
    sample's means.  The three switches are traced (``lax.cond``): the sweeps before and after
    ``hyper_start`` and ``burn_in`` and the evaluated ones run the same program; ``loglik`` (the
    fit evaluates at all) is static.  Returns the new state, the sums and the record vector
    (float32, :func:`_read`), which the host fetches once."""
    # the count histograms by the compiled kernel where it runs the sweeps (static, like the sweep's
    # backend; decided on the fit's settings: _post_cfg normalises the sampler's away)
    by_kernel = kernel.sweep_backend(cfg) == "ffi"
    cfg = _post_cfg(cfg)
    flags = np.array([it, hyper, accumulate, evaluate], np.int32)  # one transfer
    hyper_vals, avg, rec = _post_jit(state, avg, k_hyp, flags, tokens, cfg, loglik, by_kernel)
    return state._replace(**hyper_vals), avg, rec


@lru_cache(maxsize=64)
def _post_cfg(cfg: Config) -> Config:
    """The settings :func:`_post_jit` reads, the others normalised (fewer programs); cached: a
    sweep's host work is a few hundred microseconds, each ``dataclasses.replace`` ~80 of them."""
    cfg = canonical(cfg)
    if not cfg.sample:
        cfg = replace(cfg, eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0))
    if "alpha" not in cfg.sample:  # the objective reads the histogram of n_vk only
        cfg = replace(cfg, max_doc_len=0)
    return cfg


@partial(jit, static_argnames=("cfg", "loglik", "by_kernel"), donate_argnums=1)
def _post_jit(state, avg, k_hyp, flags, tokens, cfg, loglik, by_kernel=False):
    it, on = flags[0], flags[1:] > 0
    h_wk = histograms(state, replace(cfg, max_doc_len=0), tokens, by_kernel=by_kernel)[1]
    if cfg.sample:
        def update(state):
            h_dk = histograms(state, replace(cfg, max_word_count=0), tokens, by_kernel=by_kernel)[0]
            new = hyper_step(jax.random.fold_in(k_hyp, it), state, cfg, tokens, (h_dk, h_wk))
            return tuple(getattr(new, h) for h in HYPER)

        stored = jax.lax.cond(on[0], update, lambda state: tuple(getattr(state, h) for h in HYPER), state)
        # the objective reads the hyperparameters as stored: XLA would otherwise recompute β's
        # exp inside the objective's fusions, where its last bit can differ (and Wβ's log-gamma
        # with it, 0.03 per topic at β ~ 10^3 in float32)
        stored = jax.lax.optimization_barrier(stored)
        state = state._replace(**dict(zip(HYPER, stored)))
    terms = collapsed_terms(state, cfg, h_wk)
    live = jnp.sum(state.n_k > 0, dtype=jnp.int32)
    n_ll = _loglik_blocks(tokens.doc.shape[0]) if loglik else 0
    mcfg = _means_cfg(cfg)

    def means(avg):
        # one pass for the sums and the evaluation: the sample's means are taken once
        phi, theta, lv = _sample_means(state, mcfg, tokens.n_d)
        avg = jax.lax.cond(on[1], lambda a: add_sample(a, phi, theta, lv), lambda a: a, avg)
        if not loglik:
            return avg, jnp.zeros((0,), jnp.float32)
        ll = jax.lax.cond(on[2], lambda: _loglik_totals(phi, theta, tokens.doc, tokens.word),
                          lambda: jnp.zeros((n_ll,), jnp.float32))
        return avg, ll

    avg, ll = jax.lax.cond(on[1] | on[2], means, lambda a: (a, jnp.zeros((n_ll,), jnp.float32)), avg)
    rec = jnp.concatenate([jnp.stack([*(jnp.asarray(getattr(state, h), jnp.float32) for h in HYPER),
                                      live.astype(jnp.float32)]), terms.astype(jnp.float32), ll])
    return {h: getattr(state, h) for h in HYPER if h in cfg.sample}, avg, rec


def _read(vals: np.ndarray, n_ll: int) -> tuple[dict, float, int, float]:
    """The record vector of :func:`_post_jit` on the host: the hyperparameters, the objective and
    the training log-likelihood (float64 sums of their float32 terms; the latter meaningful only
    on an evaluated sweep) and the live topics."""
    vals = np.asarray(vals, np.float64)
    end = len(vals) - n_ll
    return ({h: float(vals[i]) for i, h in enumerate(HYPER)}, float(np.sum(vals[_OBJ:end])), int(vals[_LIVE]),
            float(np.sum(vals[end:])))


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


def init_fit(key, tokens: Tokens, cfg: Config, hyper: dict, init_topics: int) -> tuple[State, tuple]:
    """:func:`init` (random initial assignment) from a fit's ``key``, and the fit's keys
    ``(transform seed, hyperparameter key, chain key)``: one compiled program
    (:func:`topicjax.lida.state.init_fit_state`)."""
    state, keys = init_fit_state(key, tokens, cfg, hyper, init_topics)
    return State(state, cfg, None, {h: [] for h in HYPER}), keys


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
    it32 = np.int32(it)
    while True:
        # without activations nothing can overflow, so the old state is not needed
        new = sweep(state, key, tokens, cfg, donate=not (cfg.focused or cfg.sparse), it=it32)
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
    # one compiled program after the sweep for the hyperparameters, the objective, the live topics,
    # the posterior sums and the training likelihood, its record fetched once; the sums are held
    # from the first sweep (zero until burn_in), so that every sweep runs that same program
    evaluate = bool(static.eval_every) and ((it + 1) % static.eval_every == 0 or it == static.max_iter - 1)
    loglik = bool(static.eval_every)
    state, avg, rec = _post(state, avg if avg is not None else zero_sums(cfg), k_hyp, it, tokens, cfg,
                            hyper=it >= static.hyper_start, accumulate=it >= static.burn_in, evaluate=evaluate,
                            loglik=loglik)
    n_ll = _loglik_blocks(tokens.doc.shape[0]) if loglik else 0
    hypers, objective, live, ll = _read(jax.device_get(rec), n_ll)  # the sweep's one wait for the device
    trace = {h: trace[h] + [hypers[h]] for h in HYPER}
    # a topic is live while it holds tokens: an FTM/LIDA slot can stay active in documents
    # (theta_bar) with none, its Φ then the prior alone (issue 45)
    rec = {"objective": objective, "n_topics": live}
    if evaluate:
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
