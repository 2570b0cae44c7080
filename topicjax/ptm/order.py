"""Top-down model-order selection of PTM (2014 sec. 6.5, 2020 sec. 3.5)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from topicjax.core import checkpoint as ck
from topicjax.core.random import as_key, check_random_state, fresh_seed
from topicjax.core.validation import check_bool, check_int
from topicjax.data.corpus import Corpus
from topicjax.ptm import bic as pb
from topicjax.ptm.gem import PTMState, TINY, doc_mass, e_step, effective_topics, init_state, ml_scores, padded_topics
from topicjax.ptm.layout import PTMData, doc_mask
from topicjax.ptm.model import PTM, check_fit_corpus
from topicjax.core.compiled import jit

__all__ = ["OrderSelection", "reduce_topics", "select_order"]


@dataclass
class OrderSelection:
    """Result of :func:`select_order`: every order's model, BIC and fitting time."""

    orders: list[int]
    bics: list[float]
    models: dict
    seconds: list[float]
    best_order: int = 0
    best_model: PTM | None = None
    seed: object = None

    def curve(self):
        """``(orders, bics)`` as arrays, from the largest order down."""
        return np.asarray(self.orders), np.asarray(self.bics)


def _validate_orders(n_docs: int, m_max: int, m_min: int, step: int) -> list[int]:
    for name, val in (("m_max", m_max), ("m_min", m_min), ("step", step)):
        check_int(val, name, 1)
    if m_min > m_max:
        raise ValueError(f"m_min={m_min} is larger than m_max={m_max}")
    if m_max > n_docs:
        raise ValueError(f"m_max={m_max} is larger than the number of documents ({n_docs}); every topic needs a document")
    if (m_max - m_min) % step:
        last = m_max - ((m_max - m_min) // step) * step
        raise ValueError(
            f"step={step} from m_max={m_max} skips past m_min={m_min} (it reaches {last}, then {last - step}); "
            f"choose a step dividing m_max - m_min = {m_max - m_min}"
        )
    return list(range(int(m_max), int(m_min) - 1, -int(step)))


def _reduce_impl(state: PTMState, data: PTMData, keep, n_pad_new: int):
    """Keep the topics ``keep`` (indices), repad to ``n_pad_new``, give documents left without a
    topic their maximum-likelihood remaining topic, renormalise proportions, run the E-step."""
    D = state.v.shape[0]
    N = state.u.shape[1]
    Mk = keep.shape[0]
    P = n_pad_new
    tm = jnp.arange(P) < Mk
    pad_r = lambda a: jnp.concatenate([a[keep], jnp.zeros((P - Mk,) + a.shape[1:], a.dtype)], axis=0)
    pad_c = lambda a: jnp.concatenate([a[:, keep], jnp.zeros((D, P - Mk), a.dtype)], axis=1)
    u = pad_r(state.u)
    beta = pad_r(state.beta)
    # Specific words with beta = 0 (turned on while the topic generated none of them: a valid
    # maximiser of (7)) would give zero probability to the words of a document newly assigned to
    # the topic, an infinite BIC from which GEM's bound no longer holds.  The warm start makes
    # them shared again and rescales the topic's other specific probabilities to stay normalised;
    # a topic whose specific words are all dead becomes the shared model on them.
    dead = u & (beta <= 0) & tm[:, None]
    live = u & ~dead
    all_dead = ~jnp.any(live, axis=1, keepdims=True)
    S_old = jnp.sum(jnp.where(u, data.beta0[None, :], 0.0), axis=1, keepdims=True)
    S_new = jnp.sum(jnp.where(live, data.beta0[None, :], 0.0), axis=1, keepdims=True)
    beta = jnp.where(all_dead, jnp.where(u, data.beta0[None, :], 0.0),
                     jnp.where(live, beta * (S_new / jnp.maximum(S_old, TINY)), 0.0))
    u = jnp.where(all_dead, u, live)
    v = pad_c(state.v)
    alpha = pad_c(jnp.where(state.v, state.alpha, 0.0))
    orphan = ~jnp.any(v, axis=1)
    if doc_mask(data) is not None:  # padding rows (no document) stay without a topic
        orphan = orphan & doc_mask(data)
    scores = ml_scores(data, effective_topics(u, beta, data.beta0, tm), D)
    best = jnp.argmax(jnp.where(tm[None, :], scores, -jnp.inf), axis=1)
    v = jnp.where(orphan[:, None], best[:, None] == jnp.arange(P)[None, :], v)
    alpha = jnp.where(orphan[:, None], v.astype(jnp.float32), alpha)
    tot = jnp.sum(alpha, axis=1, keepdims=True)
    nv = jnp.sum(v, axis=1, keepdims=True, dtype=jnp.int32)
    # v / n_v in alpha's dtype (bool / int64 would be float64 under JAX_ENABLE_X64)
    spread = v.astype(alpha.dtype) / jnp.maximum(nv, 1).astype(alpha.dtype)
    alpha = jnp.where(tot > 0, alpha / jnp.where(tot > 0, tot, 1.0), spread)
    x, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm)
    z = jnp.zeros((), jnp.int32)
    return PTMState(beta, u, alpha, v, tm, x, ll, s1, s2, z, z, z)


_reduce_jit = jit(_reduce_impl, static_argnames=("n_pad_new",))


def reduce_topics(state: PTMState, data: PTMData, n_remove: int) -> PTMState:
    """Remove the ``n_remove`` topics with the smallest aggregate mass ``sum_d alpha_jd`` (2014
    sec. 6.5) and warm-start the smaller model from the others: their switches and probabilities
    are kept (specific words of probability 0 become shared again, see :func:`_reduce_impl`),
    documents keep their remaining topics with renormalised proportions, and a document that
    lost all its topics gets its maximum-likelihood remaining topic (as in sec. 6.3)."""
    tm = np.asarray(state.topic_mask)
    M = int(tm.sum())
    mass = np.asarray(jnp.sum(jnp.where(state.v, state.alpha, 0.0), axis=0))[:M]
    drop = np.argsort(mass, kind="stable")[:n_remove]
    keep = np.setdiff1d(np.arange(M), drop)
    return _reduce_jit(state, data, jnp.asarray(keep, jnp.int32), padded_topics(M - n_remove))


def select_order(corpus, m_max: int, m_min: int = 2, step: int = 1, *, bic: str = "2014", random_state: int = 0,
                 progress: bool = True, keep_models: bool = True, callback=None, checkpoint=None,
                 checkpoint_every: int = 10, **ptm_params) -> OrderSelection:
    """Top-down model-order selection (2014 sec. 6.5, 2020 sec. 3.5).

    Fits a :class:`PTM` with ``m_max`` topics, then repeatedly removes the ``step`` least massive
    topics and refits from the remaining ones, down to ``m_min``; returns every order's model
    (``keep_models``) and BIC and the BIC-minimising model.  ``callback(order, model, seconds)``
    is called after every order (e.g. to evaluate it).  ``ptm_params`` are the other parameters
    of :class:`PTM` (``max_iter``, ``tol``, ...), validated as :meth:`PTM.fit` does.  Errors:
    ``m_max`` larger than the number of documents, and steps that do not land on ``m_min``.

    ``random_state``: an int, ``None`` (a fresh seed, kept in the result's ``seed``) or a key.
    ``checkpoint``: a folder where the sweep's progress is saved (every ``checkpoint_every`` GEM
    iterations, and at the end of every order): a killed sweep called again with the same
    folder resumes at the order and iteration where it stopped (finished orders are restored
    from their last state, not refitted) and gives the same result bit for bit on CPU
    (:mod:`topicjax.core.checkpoint`).
    """
    from tqdm.auto import tqdm

    corpus = corpus if isinstance(corpus, Corpus) else PTM()._train_corpus(corpus)
    orders = _validate_orders(corpus.n_docs, m_max, m_min, step)
    pb.check_kind(bic)
    check_random_state(random_state)
    check_bool(progress, "progress")
    check_bool(keep_models, "keep_models")
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be None or a callable callback(order, model, seconds), got {callback!r}")
    if "n_components" in ptm_params:
        raise ValueError("select_order chooses n_components itself (from m_max down to m_min); do not pass it")
    unknown = sorted(set(ptm_params) - set(PTM._get_param_names()))
    if unknown:
        raise ValueError(f"select_order: PTM has no parameter(s) {unknown}")
    proto = PTM(n_components=orders[0], bic=bic, random_state=random_state, progress=progress, **ptm_params)
    proto._validate_params()  # max_iter, tol, random_state: the messages of PTM.fit
    cfg = proto._config()
    params = proto._checkpoint_params()
    params.pop("n_components")
    ckpt = ck.open_checkpoint(checkpoint, checkpoint_every, {"function": "topicjax.ptm.select_order", "orders": orders,
                                                             "params": ck.describe(params),
                                                             "corpus": ck.fingerprint(corpus)})
    seed = fresh_seed() if random_state is None else random_state
    if ckpt is not None:
        seed = ckpt.start(seed)
    data = proto._layout(corpus)
    result = OrderSelection([], [], {}, [])
    result.seed = seed
    state = None
    bar = tqdm(orders, desc="PTM orders", disable=not progress)
    try:
        for M in bar:
            t0 = time.perf_counter()
            if state is None:
                check_fit_corpus(corpus, M)
                state = init_state(as_key(seed), data, M, n_init_docs=proto.n_init_docs)
            else:
                state = reduce_topics(state, data, int(np.asarray(state.topic_mask).sum()) - M)
            model = PTM(n_components=M, bic=bic, random_state=random_state, progress=progress, **ptm_params)
            model.vocab_ = list(corpus.vocab)
            model.n_features_in_ = corpus.n_words
            model.seed_ = seed
            model.fit_state(data, state, cfg, desc=f"PTM M={M}",
                            checkpoint=None if ckpt is None else ckpt.run(f"order_{M}"))
            state = model.last_state_
            model.last_state_ = None  # keep the sweep's memory bounded: only host arrays per order
            secs = time.perf_counter() - t0
            result.orders.append(M)
            result.bics.append(model.bic_)
            result.seconds.append(secs)
            if keep_models:
                result.models[M] = model
            if callback is not None:
                callback(M, model, secs)
            if not keep_models and (result.best_model is None or model.bic_ <= min(result.bics)):
                result.best_model = model
            bar.set_postfix(M=M, bic=f"{model.bic_:.6g}")
    finally:
        bar.close()
    i = int(np.argmin(result.bics))
    result.best_order = result.orders[i]
    if keep_models:
        result.best_model = result.models[result.best_order]
    return result
