"""The parallel token sweep: documents in parallel, each document's tokens in sequence with its own
counts exact, the shared word-topic counts refreshed between blocks of documents.

**What is exact.**  Every document's tokens are resampled one after the other by eq. (35)-(38)
with the document's own counts n_kd updated token by token, and with the document's own changes
to n_vk and n_k applied as they happen (a later token of the same word sees the new topic of an
earlier one).  With one document per block this is the exact collapsed Gibbs sweep, document by
document.

**The approximation (AD-LDA, Newman et al. 2009).**  The documents of one block
(:mod:`topicjax.lida.layout`) are sampled in parallel: each sees n_vk and n_k as they were at the
start of the block plus its own changes, not the changes that the other documents of the block
make at the same time.  Counts are merged after every block, so they always equal the assignments
between blocks.  The chain is then not exactly the collapsed Gibbs sampler of the paper; the tests
compute its stationary distribution by enumeration on tiny corpora and bound its distance to the
posterior, and ``experiments/lida_parallel_vs_exact.py`` measures held-out perplexity against the
exact sweep on KOS.

**Sparse active topics.**  With topic masks (FTM, LIDA) a token's conditional is non-zero only on
the topics active in its document (θ̄_kd = 1, eq. 28-30).  The sweep builds, per document, the
sorted list of its active slots padded to ``n_active`` = the largest number of active topics of a
document (a power of two), and samples each token over that list: O(n_active) per token, not
O(K_max); the word masks φ̄_vk (31-34) are gathered on the same list.  K_max itself only enters
through O(D K_max) work per sweep (building the lists), never per token.

**Per-token draw.**  ``mh_steps = 0``: the dense categorical over the active list.  ``mh_steps > 0``
(LDA and SSTM, where every slot is active): that many Metropolis-Hastings steps alternating a
document proposal q(k) ∝ n_kd^{-i} + α (a random *other* token of the document, its current topic,
or a uniform topic) and a word proposal q(k) ∝ n_vk^{-i} + β with the counts the target sees (a
random other token of the word: its current topic in this document, its block-start topic in
other documents), each O(1) (the cycle proposals of LightLDA, Yuan et al. 2015).  The proposals do
not depend on the token's own topic, so each MH step leaves the token's conditional invariant.

Uniforms come from a hash of (token id, sweep seed): the chain does not depend on the lane layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .draw import inverse_cdf, token_uniform
from .state import Config, State, Tokens

__all__ = ["assign_parallel", "active_lists", "denominator"]


def denominator(state: State, cfg: Config, phi_bar):
    """φ̄_·k β (eq. 35, 37; active words of each topic) or W β (eq. 36, 38): (K,) float32."""
    if cfg.sparse:
        return jnp.sum(phi_bar, axis=0, dtype=jnp.int32).astype(jnp.float32) * state.beta
    return jnp.full((cfg.n_topics,), cfg.n_words * state.beta, jnp.float32)


def active_lists(theta_bar, n_active: int):
    """``(act, rank)``: act (D, n_active) the active slots of every document in increasing order,
    padded with K_max; rank (D, K_max) the position of every active slot in its document's list."""
    D, K = theta_bar.shape
    rank = jnp.cumsum(theta_bar, axis=1, dtype=jnp.int32) - 1
    col = jnp.where(theta_bar, rank, n_active)  # inactive entries go out of range: dropped
    rows = jnp.broadcast_to(jnp.arange(D, dtype=jnp.int32)[:, None], (D, K))
    slots = jnp.broadcast_to(jnp.arange(K, dtype=jnp.int32)[None, :], (D, K))
    act = jnp.full((D, n_active), K, jnp.int32).at[rows, col].set(slots, mode="drop")
    return act, rank


def assign_parallel(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar, n_active: int):
    """One parallel sweep of the topic assignments with the masks fixed; returns (z, n_dk, n_wk, n_k).

    ``n_active``: length of the active-topic lists (>= the largest number of active topics of a
    document; ignored for LDA/SSTM, whose lists are all K_max slots)."""
    K, N, D = cfg.n_topics, cfg.n_tokens, cfg.n_docs
    bl = tokens.blocks
    nb, Lb, B = bl.tok.shape
    C = bl.docs.shape[1]
    all_topics = not cfg.focused  # positions in the active list are slots
    A = K if all_topics else int(n_active)
    if cfg.mh_steps and not all_topics:
        raise ValueError("mh_steps > 0 needs every topic active in every document (variants 'lda', 'sstm')")
    alpha, beta = state.alpha, state.beta
    den = denominator(state, cfg, phi_bar)
    seed = jax.random.bits(key, (), jnp.uint32)
    iota_a = jnp.arange(A, dtype=jnp.int32)
    lane = jnp.arange(B, dtype=jnp.int32)
    if all_topics:
        act = None
        pos, cnt_all = state.z, state.n_dk
    else:
        act, rank = active_lists(theta_bar, A)
        pos = rank[tokens.doc, state.z]
        cnt_all = jnp.where(act < K, jnp.take_along_axis(state.n_dk, jnp.minimum(act, K - 1), axis=1), 0)
    fill = lambda a, idx, value=0: a.at[idx].get(mode="fill", fill_value=value)

    def block(carry, xs):
        pos, cnt_all, n_wk, n_k = carry
        tok, loc, start, run, docs = xs
        valid = tok < N
        j0 = fill(pos, tok)
        w = fill(tokens.word, tok)
        cnt0 = jnp.concatenate([fill(cnt_all, docs), jnp.zeros((1, A), jnp.int32)])
        nk_den = den + n_k.astype(jnp.float32)
        if all_topics:
            act_b = None
        else:
            act_b = jnp.concatenate([fill(act, docs, K), jnp.full((1, A), K, jnp.int32)])
            nk_den = jnp.where(act_b < K, nk_den[jnp.minimum(act_b, K - 1)], 1.0)
        xs = (jnp.arange(Lb, dtype=jnp.int32), tok, loc, start, run, w, j0, valid)
        if cfg.mh_steps:
            extra = (fill(tokens.word_start, tok), fill(tokens.word_len, tok), fill(tokens.word_pos, tok),
                     fill(tokens.n_d, fill(tokens.doc, tok)))
            step = _mh_step(cfg, alpha, beta, den, n_wk, n_k, phi_bar, pos, tokens.by_word, seed, lane, bl.run_shift)
            init = (cnt0, jnp.zeros_like(cnt0), jnp.full((B, K), -bl.run_shift, jnp.int32), j0)
            xs = xs + extra
        else:
            step = _dense_step(cfg, alpha, beta, n_wk, phi_bar, nk_den, act_b, seed, iota_a)
            init = (cnt0, jnp.zeros_like(cnt0), jnp.zeros((B, A), jnp.int32))
        (cnt, *_), j1 = jax.lax.scan(step, init, xs)
        inc = valid.astype(jnp.int32)
        if all_topics:
            k_old, k_new = j0, j1
        else:
            k_old, k_new = act_b[loc, j0], act_b[loc, j1]
        n_wk = n_wk.at[w, k_old].add(-inc, mode="drop").at[w, k_new].add(inc, mode="drop")
        n_k = n_k.at[k_old].add(-inc, mode="drop").at[k_new].add(inc, mode="drop")
        cnt_all = cnt_all.at[docs].set(cnt[:C], mode="drop")
        pos = pos.at[tok].set(j1, mode="drop")
        return (pos, cnt_all, n_wk, n_k), None

    (pos, cnt_all, n_wk, n_k), _ = jax.lax.scan(
        block, (pos, cnt_all, state.n_wk, state.n_k), (bl.tok, bl.loc, bl.start, bl.run, bl.docs))
    if all_topics:
        return pos, cnt_all, n_wk, n_k
    z = act[tokens.doc, pos]
    rows = jnp.broadcast_to(jnp.arange(D, dtype=jnp.int32)[:, None], (D, A))
    n_dk = jnp.zeros((D, K), jnp.int32).at[rows, act].set(cnt_all, mode="drop")
    return z, n_dk, n_wk, n_k


def _dense_step(cfg: Config, alpha, beta, n_wk, phi_bar, nk_den, act_b, seed, iota_a):
    """One token per lane: the conditional over the document's active list, drawn by inverse CDF.

    Carry: the block's document counts on the lists (C+1, A), the documents' own changes to n_k
    (C+1, A), and each lane's own changes to n_vk for the word of its current run (B, A)."""
    K = cfg.n_topics
    all_topics = act_b is None

    def step(carry, x):
        cnt, dk, dw = carry
        i, t, d, _, run, v, j0, ok = x
        inc = ok.astype(jnp.int32)
        dw = jnp.where((run == i)[:, None], 0, dw)  # a new run (document, word): no own changes yet
        own = ((iota_a[None, :] == j0[:, None]) & ok[:, None]).astype(jnp.int32)
        if all_topics:
            nw = n_wk[v]
            nkd = nk_den[None, :]
            slots = None
        else:
            slots = act_b[d]
            nw = n_wk.at[v[:, None], slots].get(mode="fill", fill_value=0)
            nkd = nk_den[d]
        p = (alpha + (cnt[d] - own)) * (beta + (nw + dw - own)) / (nkd + (dk[d] - own))
        if not all_topics:
            p = jnp.where(slots < K, p, 0.0)
        if cfg.sparse:
            on = phi_bar[v] if all_topics else phi_bar.at[v[:, None], slots].get(mode="fill", fill_value=False)
            p = jnp.where(on, p, 0.0)
        j1 = jnp.where(ok, inverse_cdf(p, token_uniform(t, seed, 0)), j0)
        d2 = jnp.stack([d, d], 1)
        jj = jnp.stack([j0, j1], 1)
        upd = jnp.stack([-inc, inc], 1)
        cnt = cnt.at[d2, jj].add(upd)
        dk = dk.at[d2, jj].add(upd)
        dw = dw - own + ((iota_a[None, :] == j1[:, None]) & ok[:, None]).astype(jnp.int32)
        return (cnt, dk, dw), j1

    return step


def _mh_step(cfg: Config, alpha, beta, den, n_wk, n_k, phi_bar, pos0, by_word, seed, lane, shift):
    """One token per lane by ``cfg.mh_steps`` Metropolis-Hastings steps (every slot active).

    Proposals read *current* topics: a random other token of the document (the lane's buffer of
    its tokens' topics, updated as they are resampled) or of the word (the buffer for tokens of the
    same run, the block-start topics ``pos0`` for other documents, as the target sees them).  Old
    topics of tokens already resampled must not be used: they are correlated with the current
    token, and a proposal built from them biases the chain (tested).

    The lane's own changes to n_vk are kept in one int32 cell per (lane, topic) holding
    ``run * shift + change + shift / 2``: a cell written during an earlier run reads as 0, so a new
    run costs nothing (no O(K) reset per token)."""
    K = cfg.n_topics
    Kf = jnp.float32(K)
    nkf = n_k.astype(jnp.float32)
    half = shift // 2

    def step(carry, x):
        cnt, dk, dwc, zl = carry
        i, t, d, ds, run, v, k0, ok, ws, wl, wp, nd = x
        inc = ok.astype(jnp.int32)
        stamp = run * shift

        def dw(k):
            cell = dwc[lane, k]
            return jnp.where(cell // shift == run, cell - stamp - half, 0)

        def target(k):
            """Conditional (37)-(38) of topic k and the proposal masses n_kd^{-i} + α, n_vk^{-i} + β."""
            own = (k == k0).astype(jnp.int32) * inc
            a = cnt[d, k] - own
            b = n_wk[v, k] + dw(k) - own
            p = (alpha + a) * (beta + b) / (den[k] + nkf[k] + (dk[d, k] - own))
            if cfg.sparse:
                p = jnp.where(phi_bar[v, k], p, 0.0)
            return p, a + alpha, b + beta

        def pick(u, n_other, mass, own_pos, fetch):
            """A random other token's topic (probability n_other / (n_other + K mass)) or a uniform topic."""
            x_ = u * (n_other.astype(jnp.float32) + Kf * mass)
            j = jnp.minimum(x_.astype(jnp.int32), jnp.maximum(n_other - 1, 0))
            j = j + (j >= own_pos)
            uni = jnp.minimum(((x_ - n_other) / mass).astype(jnp.int32), K - 1)
            return jnp.where(x_ < n_other, fetch(j), uni)

        run_first = wp - (i - run)  # position (among the word's tokens) of the run's first token

        def word_token(j):
            in_run = (j >= run_first) & (j <= wp)  # this document's tokens of the word seen so far
            return jnp.where(in_run, zl[jnp.clip(run + j - run_first, 0, zl.shape[0] - 1), lane],
                             pos0[by_word[ws + j]])

        s = k0
        ps, qds, qws = target(s)
        for m in range(cfg.mh_steps):
            xu, au = token_uniform(t, seed, 2 * m), token_uniform(t, seed, 2 * m + 1)
            if m % 2 == 0:  # document proposal, q(k) ∝ n_kd^{-i} + α
                tk = pick(xu, nd - 1, alpha, i - ds, lambda j: zl[ds + j, lane])
            else:  # word proposal, q(k) ∝ n_vk^{-i} + β (the counts the target sees)
                tk = pick(xu, wl - 1, beta, wp, word_token)
            pt, qdt, qwt = target(tk)
            qs, qt = (qds, qdt) if m % 2 == 0 else (qws, qwt)
            acc = au * ps * qt < pt * qs
            keep = lambda new, old: jnp.where(acc, new, old)
            s, ps, qds, qws = keep(tk, s), keep(pt, ps), keep(qdt, qds), keep(qwt, qws)
        k1 = jnp.where(ok, s, k0)
        same = (k1 == k0).astype(jnp.int32)
        d2 = jnp.stack([d, d], 1)
        kk = jnp.stack([k0, k1], 1)
        upd = jnp.stack([-inc, inc], 1)
        cells = jnp.stack([stamp + half + dw(k0) - inc + same * inc, stamp + half + dw(k1) + inc - same * inc], 1)
        kk_w = jnp.where(ok[:, None], kk, K)  # padding slots write nothing
        cnt = cnt.at[d2, kk].add(upd)
        dk = dk.at[d2, kk].add(upd)
        dwc = dwc.at[jnp.stack([lane, lane], 1), kk_w].set(cells, mode="drop")
        zl = zl.at[i].set(k1)
        return (cnt, dk, dwc, zl), k1

    return step
