"""Layout of the parallel sweep: which documents share a block and how a block is laid out in
lanes (host-side numpy, computed once per corpus).

Documents are taken in corpus order; document d belongs to block ⌊(first token of d) / block_tokens⌋,
so a block holds about ``block_tokens`` tokens (a longer document makes a block of its own).  The
documents of a block are sampled in parallel from the word-topic counts as they were at the start
of the block (:mod:`topicjax.lida.parallel`): block membership is the only thing that changes the
distribution of the chain.  Within a block, documents are packed into ``B`` *lanes* (longest
first, each into the least-loaded lane); a lane holds whole documents back to back and the sweep
advances all lanes one token per step, so the number of sequential steps per block is the longest
lane, about ``block_tokens / B`` and at least the longest document.  Lanes only decide the work
layout: the draws of a token depend on its id and the sweep's seed, not on its lane.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Blocks", "make_blocks", "run_starts"]


class Blocks(NamedTuple):
    """Index arrays of the parallel sweep: ``nb`` blocks of ``B`` lanes of ``Lb`` token slots, at
    most ``C`` documents per block (``N``, ``C``, ``D`` mark padding)."""

    # the lane layout (None where only the compiled kernel sweeps: ``make_blocks(lanes_layout=False)``)
    tok: jax.Array | None  # (nb, Lb, B) int32 token id
    loc: jax.Array | None  # (nb, Lb, B) int32 row of the token's document among the block's documents
    start: jax.Array | None  # (nb, Lb, B) int32 lane position of the first token of the document
    run: jax.Array | None  # (nb, Lb, B) int32 lane position of the first token of the run (same document and word)
    docs: jax.Array  # (nb, C) int32 documents of the block
    run_shift: jax.Array  # () int32 power of two above twice the longest run (packing of run deltas)


def run_starts(doc: np.ndarray, word: np.ndarray) -> np.ndarray:
    """For every token, the id of the first token of its run (consecutive tokens of one word in one
    document)."""
    doc, word = np.asarray(doc), np.asarray(word)
    new = np.ones(word.size, bool)
    new[1:] = (word[1:] != word[:-1]) | (doc[1:] != doc[:-1])
    return np.maximum.accumulate(np.where(new, np.arange(word.size), 0))


def make_blocks(n_d, word, block_tokens: int, lanes: int | None = None, max_lanes: int = 1024, *,
                lanes_layout: bool = True) -> Blocks:
    """Blocks of about ``block_tokens`` tokens of consecutive documents, each packed into ``lanes``
    lanes (default: as many as fit documents of the longest length, at most ``max_lanes``).
    ``lanes_layout=False``: only the blocks' documents (``tok``, ``loc``, ``start``, ``run`` are
    None), which is all the compiled kernel reads."""
    n_d = np.asarray(n_d, np.int64)
    word = np.asarray(word)
    if block_tokens < 1:
        raise ValueError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    D, N = n_d.size, int(n_d.sum())
    off = np.concatenate([[0], np.cumsum(n_d)])
    docs = np.flatnonzero(n_d > 0)
    if docs.size == 0:
        raise ValueError("the corpus has no tokens")
    _, block_of = np.unique(off[docs] // block_tokens, return_inverse=True)
    nb = int(block_of.max()) + 1
    per_block = np.bincount(block_of, weights=n_d[docs], minlength=nb)
    L_max = int(n_d.max())
    B = int(lanes) if lanes is not None else int(np.clip(per_block.max() // L_max, 1, max_lanes))
    if B < 1:
        raise ValueError(f"lanes must be a positive integer, got {lanes!r}")
    first = np.searchsorted(block_of, np.arange(nb + 1))  # members of block b: docs[first[b]:first[b+1]]
    if not lanes_layout:
        members_a = np.full((nb, int(np.diff(first).max())), D, np.int32)
        for b in range(nb):
            members_a[b, :first[b + 1] - first[b]] = docs[first[b]:first[b + 1]]
        return Blocks(None, None, None, None, jax.device_put(members_a), jax.device_put(np.int32(0)))
    lane = np.zeros(D, np.int64)
    pos = np.zeros(D, np.int64)
    loc = np.zeros(D, np.int64)
    Lb, C = 1, 1
    for b in range(nb):
        members = docs[first[b]:first[b + 1]]
        loc[members] = np.arange(members.size)
        C = max(C, members.size)
        heap = [(0, i) for i in range(B)]
        for d in members[np.argsort(-n_d[members], kind="stable")]:
            load, i = heapq.heappop(heap)
            lane[d], pos[d] = i, load
            heapq.heappush(heap, (load + int(n_d[d]), i))
        Lb = max(Lb, max(load for load, _ in heap))
    tok = np.full((nb, Lb, B), N, np.int32)
    loc_a = np.full((nb, Lb, B), C, np.int32)
    start = np.zeros((nb, Lb, B), np.int32)
    run = np.full((nb, Lb, B), -1, np.int32)
    members_a = np.full((nb, C), D, np.int32)
    longest_run = 1
    # the slots are filled a block at a time: the temporaries are those of one block's tokens
    for b in range(nb):
        members = docs[first[b]:first[b + 1]]
        members_a[b, :members.size] = members
        t0, t1 = int(off[members[0]]), int(off[members[-1] + 1])  # a block's documents are consecutive
        doc = np.repeat(members, n_d[members])
        j = np.arange(t0, t1) - off[doc]  # position of the token in its document
        rs = run_starts(doc, word[t0:t1]) + t0  # runs never cross documents
        longest_run = max(longest_run, int(np.max(np.arange(t0, t1) - rs)) + 1)
        where = (b, pos[doc] + j, lane[doc])
        tok[where] = np.arange(t0, t1)
        loc_a[where] = loc[doc]
        start[where] = pos[doc]
        run[where] = pos[doc] + (rs - off[doc])
    shift = 1 << (2 * longest_run + 2).bit_length()
    if Lb * shift >= 2**31:
        raise ValueError(f"a block lane of {Lb} tokens with runs of {longest_run} tokens of one word in one "
                         "document does not fit the packed run counters; use smaller blocks (tokens_per_block)")
    host = [tok, loc_a, start, run, members_a]
    del tok, loc_a, start, run, members_a
    out = []
    while host:  # each host array is released once it is on the device
        out.append(jnp.asarray(host.pop(0)))
    return Blocks(*out, jnp.asarray(shift, jnp.int32))
