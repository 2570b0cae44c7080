"""Static settings, the token stream and the sampler state of the LIDA family (sec. 4).

The arrays have a static number of topic *slots* ``K_max`` (``Config.n_topics``); a slot is a live
topic while its column of Θ̄ has an active entry (LDA/SSTM: every slot).  Counts are dense
``int32``: ``n_dk`` (D x K_max; the paper's n_kd stored document-major), ``n_wk`` (V x K_max),
``n_k``; ``z`` holds the slot of every token.  With the infinite vocabulary (eq. 32-33) the V word
rows are the W observed words followed by "phantom" rows for active but unobserved words; with the
finite vocabulary (eq. 34) V = W.  Every sampler mode and backend reads and writes this same state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.core.numerics import EPS
from topicjax.data.corpus import Corpus
from .layout import Blocks, make_blocks
from topicjax.core.compiled import jit

__all__ = ["Config", "Tokens", "State", "VARIANTS", "HYPER", "MODES", "BIG", "TINY", "make_tokens",
           "count_tables", "init_state", "grow_state", "pow2", "canonical"]

VARIANTS = ("lida", "ftm", "sstm", "lda")
HYPER = ("alpha", "beta", "eta", "delta", "gamma", "xi")
MODES = ("parallel", "exact", "stale")
BIG = 1e30  # stands for +inf in log-odds (a state that cannot be left)
TINY = EPS  # the clamp before a log: the package's one EPS


@dataclass(frozen=True)
class Config:
    """Static settings of the sampler (hashable: a jit static argument)."""

    variant: str
    n_topics: int  # K_max, slots
    n_docs: int
    n_words: int  # W, observed vocabulary
    n_rows: int  # W + phantom rows (infinite vocabulary) or W
    n_tokens: int
    vocabulary: str = "finite"
    mode: str = "parallel"
    batch: int = 65536  # tokens per batch of the stale mode (the parallel mode's blocks live in Tokens)
    mh_steps: int = 0
    sample: tuple = ("alpha", "beta", "eta", "delta", "gamma", "xi")
    sigma: float = 0.0
    zeta: float = 0.0
    eta_prior: tuple = (1.0, 1.0)
    gamma_prior: tuple = (1.0, 1.0)
    mh_scale: float = 0.3
    mh_hyper_steps: int = 10
    max_doc_len: int = 0  # bounds of a count n_dk / n_wk (histograms of the α, β updates); 0: unknown
    max_word_count: int = 0
    unroll: int = 1  # unrolling of the mask scans (fewer loop iterations: faster on GPU, slower to compile)

    @property
    def focused(self) -> bool:  # topic masks Θ̄ sampled
        return self.variant in ("lida", "ftm")

    @property
    def sparse(self) -> bool:  # word masks Φ̄ sampled
        return self.variant in ("lida", "sstm")

    @property
    def n_batches(self) -> int:
        return max(1, -(-self.n_tokens // self.batch))


class Tokens(NamedTuple):
    """The corpus as a token stream sorted by document, then word (device arrays)."""

    doc: jax.Array  # (N,) int32
    word: jax.Array  # (N,) int32
    n_d: jax.Array  # (D,) int32 tokens per document
    # the arrays only the stale sweep and the MH proposals read (``None`` when made without extras)
    doc_start: jax.Array | None  # (N,) first token of the token's document
    word_start: jax.Array | None  # (N,) first position of the token's word in ``by_word``
    word_len: jax.Array | None  # (N,) tokens of the token's word
    by_word: jax.Array | None  # (N,) token ids sorted by word
    word_pos: jax.Array | None  # (N,) position of the token among the tokens of its word (in ``by_word``)
    blocks: Blocks  # layout of the parallel sweep (documents per block, lanes)


def make_tokens(corpus: Corpus, block_tokens: int = 65536, lanes: int | None = None, *, extras: bool = True,
                lanes_layout: bool = True) -> Tokens:
    """Expand ``corpus`` into a token stream (doc id and word id per token, sorted by document, the
    tokens of one word consecutive within a document) and lay out the blocks of the parallel sweep
    (:func:`topicjax.lida.layout.make_blocks`: documents in corpus order, ``block_tokens`` tokens
    per block).  ``extras=False`` leaves out the five per-token arrays that only the stale sweep and
    the Metropolis-Hastings proposals read (20 bytes per token: 2 GB at NYTimes size); the exact
    and parallel dense sweeps, the compiled kernel and document completion do without them.
    ``lanes_layout=False`` keeps of the blocks only their documents (what the compiled kernel
    reads), not the lane layout of the XLA parallel sweep (four int32 per token: 1.6 GB at
    NYTimes size)."""
    # A corpus's entries are sorted by document, then word, so their repetition already is the
    # stream in document-major order with each word's tokens in one run (no sort, no int64 copies).
    doc = np.repeat(corpus.doc_ids, corpus.counts).astype(np.int32, copy=False)
    word = np.repeat(corpus.word_ids, corpus.counts).astype(np.int32, copy=False)
    n_d = np.bincount(doc, minlength=corpus.n_docs).astype(np.int32)
    doc_off = np.concatenate([[0], np.cumsum(n_d)]).astype(np.int32)
    blocks = make_blocks(n_d, word, int(block_tokens), lanes, lanes_layout=lanes_layout)
    more = dict(doc_start=None, word_start=None, word_len=None, by_word=None, word_pos=None)
    if extras:
        n_w = np.bincount(word, minlength=corpus.n_words).astype(np.int32)
        word_off = np.concatenate([[0], np.cumsum(n_w)]).astype(np.int32)
        by_word = np.argsort(word, kind="stable").astype(np.int32)
        word_pos = np.empty_like(by_word)
        word_pos[by_word] = np.arange(by_word.size, dtype=np.int32) - word_off[word[by_word]]
        put = jax.device_put
        more = dict(doc_start=put(doc_off[doc]), word_start=put(word_off[word]), word_len=put(n_w[word]),
                    by_word=put(by_word), word_pos=put(word_pos))
    # transfers: jnp.asarray of a host array compiles a program per shape
    return Tokens(doc=jax.device_put(doc), word=jax.device_put(word), n_d=jax.device_put(n_d), blocks=blocks, **more)


class State(NamedTuple):
    """Sampler state; masks and counts have ``K_max`` topic slots."""

    z: jax.Array  # (N,) int32 topic of every token
    n_dk: jax.Array  # (D, K) int32
    n_wk: jax.Array  # (V, K) int32, V = W (+ phantom rows)
    n_k: jax.Array  # (K,) int32
    theta_bar: jax.Array  # (D, K) bool topic activations (all True for lda/sstm)
    phi_bar: jax.Array  # (V, K) bool word activations (True on observed rows for lda/ftm)
    alpha: jax.Array
    beta: jax.Array
    eta: jax.Array
    delta: jax.Array
    gamma: jax.Array
    xi: jax.Array
    overflow_topics: jax.Array  # births that found no free slot in the last sweep
    overflow_words: jax.Array


#: tokens counted per step of :func:`count_tables` (bounds its temporaries)
COUNT_BLOCK = 1 << 20


@partial(jit, static_argnames=("D", "V", "K"))
def count_tables(z, doc, word, D, V, K):
    """(n_dk, n_wk, n_k) of the assignments ``z``, counted a block of tokens at a time: a scatter
    over all N tokens at once holds its (N, 2) indices and updates (20 bytes per token, 2 GB at
    NYTimes size); integer sums are the same in any order."""
    N = z.shape[0]
    blk = max(1, min(COUNT_BLOCK, N))

    def body(i, tabs):
        start = i * blk
        s0 = jnp.minimum(start, N - blk)  # the last block is shifted back to fit ...
        zz, dd, ww = (lax.dynamic_slice_in_dim(a, s0, blk) for a in (z, doc, word))
        one = ((s0 + jnp.arange(blk)) >= start).astype(jnp.int32)  # ... and counts only its new tokens
        n_dk, n_wk, n_k = tabs
        return n_dk.at[dd, zz].add(one), n_wk.at[ww, zz].add(one), n_k.at[zz].add(one)

    zeros = (jnp.zeros((D, K), jnp.int32), jnp.zeros((V, K), jnp.int32), jnp.zeros((K,), jnp.int32))
    return lax.fori_loop(0, -(-N // blk), body, zeros)


@partial(jit, static_argnames=("n", "k"))
def uniform_topics(key, n: int, k: int):
    """``n`` topics uniform in ``[0, k)`` (int32), drawn a block of :data:`COUNT_BLOCK` at a time
    (block ``b`` from ``fold_in(key, b)``): ``jax.random.randint`` over all tokens at once holds
    four ``(n,)`` temporaries, 1.5 GB at NYTimes size."""
    blk = max(1, min(COUNT_BLOCK, n))

    def body(b, z):
        s0 = jnp.minimum(b * blk, n - blk)  # the last block is shifted back to fit (it redraws the overlap)
        draw = jax.random.randint(jax.random.fold_in(key, b), (blk,), 0, k, dtype=jnp.int32)
        return lax.dynamic_update_slice_in_dim(z, draw, s0, 0)

    return lax.fori_loop(0, -(-n // blk), body, jnp.zeros((n,), jnp.int32))


def init_state(key, tokens: Tokens, cfg: Config, hyper: dict, init_topics: int,
               theta_init: np.ndarray | None = None) -> State:
    """Initial state.  Without ``theta_init``: assignments uniform over the first ``init_topics``
    slots.  With ``theta_init`` (D x K_max bool, e.g. :func:`~topicjax.lida.ibp.ibp_sample`): every
    token takes a topic uniformly among the topics active in its document, and Θ̄ = ``theta_init``.
    Word masks are Φ̄ = (counts > 0) where sampled."""
    K, D, V, W = cfg.n_topics, cfg.n_docs, cfg.n_rows, cfg.n_words
    if theta_init is None:
        tables, _ = _init_jit(key, tokens.doc, tokens.word, (D, V, W, K), int(init_topics), cfg.focused, cfg.sparse,
                              False)
        return _with_hyper(tables, hyper)
    else:
        theta_init = np.asarray(theta_init, bool)
        if theta_init.shape != (D, K):
            raise ValueError(f"theta_init has shape {theta_init.shape}, expected (n_docs, K_max) = {(D, K)}")
        m = theta_init.sum(1)
        if cfg.focused and np.any(m[np.asarray(tokens.n_d) > 0] == 0):
            d = int(np.flatnonzero((m == 0) & (np.asarray(tokens.n_d) > 0))[0])
            raise ValueError(f"theta_init: document {d} has tokens but no active topic")
        # the j-th active topic of the token's document, j uniform in [0, m_d)
        doc = np.asarray(tokens.doc)
        u = np.asarray(jax.random.uniform(key, doc.shape, jnp.float32))
        j = np.minimum((u * m[doc]).astype(np.int64), np.maximum(m[doc] - 1, 0))
        rows, cols = np.nonzero(theta_init)  # row-major: the active slots of each document in order
        start = np.concatenate([[0], np.cumsum(m)])
        z = jnp.asarray(cols[start[doc] + j].astype(np.int32))
    n_dk, n_wk, n_k = count_tables(z, tokens.doc, tokens.word, D, V, K)
    if cfg.focused:
        theta_bar = n_dk > 0 if theta_init is None else (jnp.asarray(theta_init) | (n_dk > 0))
    else:
        theta_bar = jax.device_put(np.ones((D, K), bool))
    if cfg.sparse:
        phi_bar = n_wk > 0
    else:
        phi_bar = jax.device_put(np.ascontiguousarray(np.broadcast_to((np.arange(V) < W)[:, None], (V, K))))
    return _with_hyper((z, n_dk, n_wk, n_k, theta_bar, phi_bar), hyper)


def _with_hyper(tables, hyper: dict) -> State:
    """The state of ``tables`` ``(z, n_dk, n_wk, n_k, theta_bar, phi_bar)`` and the hyperparameters
    (host scalars transferred, no program), no overflow."""
    f = lambda name: jax.device_put(np.float32(hyper[name]))
    return State(*tables, f("alpha"), f("beta"), f("eta"), f("delta"), f("gamma"), f("xi"),
                 jax.device_put(np.int32(0)), jax.device_put(np.int32(0)))


def _fit_keys(key):
    """``(transform seed, init key, hyperparameter key, chain key)`` of a fit's key (traced): the
    transform's seed is apart from the chain's keys."""
    k_tr = jax.random.fold_in(key, 0x7E57)
    k_init, k_hyp, chain_key = jax.random.split(key, 3)
    return jax.random.bits(k_tr, (), jnp.uint32), k_init, k_hyp, chain_key


@partial(jit, static_argnames=("dims", "init_topics", "focused", "sparse", "fit_key"))
def _init_jit(key, doc, word, dims, init_topics: int, focused: bool, sparse: bool, fit_key: bool):
    """The initial tables of :func:`init_state` without ``theta_init`` in one program: assignments
    uniform over the first ``init_topics`` slots, their counts and the masks (``dims`` =
    ``(D, V, W, K)``).  With ``fit_key``, ``key`` is a fit's key: its keys (:func:`_fit_keys`)
    are derived here too and returned after the tables (the initial assignment from its init
    key); else ``()``."""
    D, V, W, K = dims
    keys = ()
    if fit_key:
        seed, key, k_hyp, chain_key = _fit_keys(key)
        keys = (seed, k_hyp, chain_key)
    z = uniform_topics(key, doc.shape[0], init_topics)
    n_dk, n_wk, n_k = count_tables(z, doc, word, D, V, K)
    theta_bar = n_dk > 0 if focused else jnp.ones((D, K), bool)
    phi_bar = n_wk > 0 if sparse else jnp.broadcast_to((jnp.arange(V) < W)[:, None], (V, K))
    return (z, n_dk, n_wk, n_k, theta_bar, phi_bar), keys


def init_fit_state(key, tokens: Tokens, cfg: Config, hyper: dict, init_topics: int):
    """:func:`init_state` without ``theta_init`` from a fit's ``key``: ``(state, (transform seed,
    hyperparameter key, chain key))``, the keys those of :func:`_fit_keys` and the state that of
    ``init_state(init key, ...)``, all in one compiled program."""
    tables, keys = _init_jit(key, tokens.doc, tokens.word, (cfg.n_docs, cfg.n_rows, cfg.n_words, cfg.n_topics),
                             int(init_topics), cfg.focused, cfg.sparse, True)
    return _with_hyper(tables, hyper), keys


def grow_state(state: State, cfg: Config, n_topics: int | None = None, n_rows: int | None = None):
    """Pad ``state`` to more topic slots and/or phantom word rows (free slots appended)."""
    K_new = n_topics or cfg.n_topics
    V_new = n_rows or cfg.n_rows
    dk, dv = K_new - cfg.n_topics, V_new - cfg.n_rows
    pad = lambda a, rows, cols: jnp.pad(a, ((0, rows), (0, cols)))
    theta_fill = not cfg.focused  # lda/sstm: every slot is a topic of every document
    theta_bar = jnp.pad(state.theta_bar, ((0, 0), (0, dk)), constant_values=theta_fill)
    phi_bar = pad(state.phi_bar, dv, 0)
    if not cfg.sparse:
        phi_bar = jnp.pad(phi_bar, ((0, 0), (0, dk)), constant_values=True)
        phi_bar = phi_bar & (jnp.arange(V_new)[:, None] < cfg.n_words)
    else:
        phi_bar = pad(phi_bar, 0, dk)
    new = state._replace(
        n_dk=pad(state.n_dk, 0, dk), n_wk=pad(state.n_wk, dv, dk), n_k=jnp.pad(state.n_k, (0, dk)),
        theta_bar=theta_bar, phi_bar=phi_bar, overflow_topics=jnp.int32(0), overflow_words=jnp.int32(0),
    )
    return new, replace(cfg, n_topics=K_new, n_rows=V_new)


def pow2(n) -> int:
    """The smallest power of two >= ``n`` (>= 1): static sizes that change rarely (fewer compilations)."""
    return 1 << max(0, int(n) - 1).bit_length()


def canonical(cfg: Config) -> Config:
    """``cfg`` with the settings that only the token sweep reads normalised (fewer compilations)."""
    return replace(cfg, mode="exact", batch=1, mh_steps=0, unroll=1)
