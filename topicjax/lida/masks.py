"""Topic activations (eq. 28-30) and word activations (eq. 31-34) of Algorithm 1, with the Poisson
births of new topics (30) and new words (33).

Both masks are sampled by :func:`diagonal_scan`: blocked Gibbs over "diagonals" of the matrix
(distinct rows and distinct columns), whose entries are conditionally independent because the
conditional of an entry involves only its row sum and its column sum.  The diagonals are visited
from a random offset every sweep: a newborn topic has no active word, its first visited entry is
forced on in the finite vocabulary ("assign at least one vocabulary word to every topic", sec.
4.2), and with a fixed offset a topic born in slot s would always start with word s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from .draw import token_uniform
from .ibp import ibp_mass, log_ratio_add_empty, topic_prior_logodds, word_prior_logodds
from .state import TINY, Config, State, Tokens

__all__ = ["diagonal_scan", "poisson_small", "topic_step", "word_step"]


def diagonal_scan(key, mask, row_sum, col_sum, lr_fn, prior_fn, forced_fn, allowed_fn, unroll: int = 1,
                  cache_cap: int = 64, with_lr: bool = False):
    """Blocked Gibbs over an R x C binary matrix: block s holds the entries (i, (i+s) mod C) (R ≤ C)
    or ((j+s) mod R, j) (R > C), i.e. distinct rows and distinct columns.  The conditional of an
    entry involves only its row sum and column sum, so the entries of a block are conditionally
    independent and are drawn together.  The log odds of an entry are
    ``lr_fn(rows, m_other) + prior_fn(cols, c_other)``: a likelihood part by row (a log-gamma
    expression) and a prior part by column (a table lookup).  ``forced_fn(rows, cols, m_other)``
    (True: entry must be 1), ``allowed_fn(rows, cols, c_total)`` (False: entry must be 0).

    ``lr_fn`` is evaluated once per row at the start and then only for rows whose sum changed (in
    chunks of ``cache_cap`` rows, usually one a block): every row keeps lr(m) and lr(m − 1) for its
    current sum m (an entry that is on sees m − 1 other entries, one that is off sees m), and a
    flip moves its sum by one.  The blocks are visited in the order s0, s0 + 1, ... (mod the number of
    blocks) from a uniform random s0; the uniforms of the entries are a counter-based hash of
    (block, position).  Returns the new mask, row sums and column sums, and with ``with_lr`` also
    ``lr_fn(rows, new row sums)`` of every row (kept by the scan: no evaluation more)."""
    R, C = mask.shape
    L, S = max(R, C), min(R, C)
    iota = jnp.arange(S, dtype=jnp.int32)
    all_rows = jnp.arange(R, dtype=jnp.int32)
    k_u, k_s = jax.random.split(key)
    seed = jax.random.bits(k_u, (), jnp.uint32)
    s0 = jax.random.randint(k_s, (), 0, L, dtype=jnp.int32)
    # lr for an entry that is off (m other entries = the row sum) and for one that is on, in one
    # evaluation (each copy of lr_fn's log-gamma code costs compile time)
    both = lr_fn(jnp.concatenate([all_rows, all_rows]), jnp.concatenate([row_sum, jnp.maximum(row_sum - 1, 0)]))
    off0, on0 = both[:R], both[R:]

    def body(carry, s):
        mask, rsum, csum, lr_off, lr_on = carry
        if R <= C:
            rows, cols = iota, (iota + s) % C
        else:
            rows, cols = (iota + s) % R, iota
        cur = mask[rows, cols]
        cur_i = cur.astype(jnp.int32)
        m_o = rsum[rows] - cur_i
        c_o = csum[cols] - cur_i
        lo = jnp.where(cur, lr_on[rows], lr_off[rows]) + prior_fn(cols, c_o)
        u = token_uniform(s * S + iota, seed, 0)
        new = u * (1.0 + jnp.exp(-lo)) < 1.0  # u < sigmoid(lo)
        new = new | forced_fn(rows, cols, m_o)
        new = new & allowed_fn(rows, cols, csum[cols])
        mask = mask.at[rows, cols].set(new)
        d = new.astype(jnp.int32) - cur_i
        rsum = rsum.at[rows].add(d)
        changed = d != 0

        def refresh(lr, r, dr, valid):
            """A row whose sum went up (down) by one: its new "on" ("off") value is its old "off"
            ("on") value, and one new evaluation gives the other."""
            lr_off, lr_on = lr
            m = rsum.at[r].get(mode="fill", fill_value=0)
            fresh = lr_fn(jnp.minimum(r, R - 1), jnp.where(dr > 0, m, jnp.maximum(m - 1, 0)))
            old_off, old_on = lr_off.at[r].get(mode="fill", fill_value=0.0), lr_on.at[r].get(mode="fill", fill_value=0.0)
            r = jnp.where(valid, r, R)  # R: dropped
            return (lr_off.at[r].set(jnp.where(dr > 0, fresh, old_on), mode="drop"),
                    lr_on.at[r].set(jnp.where(dr > 0, old_off, fresh), mode="drop"))

        # the changed rows in chunks of cache_cap (usually one chunk): one traced copy of lr_fn
        cap = min(cache_cap, S)
        pos = jnp.nonzero(changed, size=S, fill_value=S)[0]
        pos = jnp.concatenate([pos, jnp.full((-S % cap,), S, jnp.int32)]) if S % cap else pos
        n_chunks = (jnp.sum(changed, dtype=jnp.int32) + cap - 1) // cap

        def chunk(j, lr):
            pj = jax.lax.dynamic_slice(pos, (j * cap,), (cap,))
            p = jnp.minimum(pj, S - 1)
            return refresh(lr, rows[p], d[p], pj < S)

        lr_off, lr_on = jax.lax.fori_loop(0, n_chunks, chunk, (lr_off, lr_on))
        return (mask, rsum, csum.at[cols].add(d), lr_off, lr_on), None

    order = (jnp.arange(L, dtype=jnp.int32) + s0) % L
    (mask, rsum, csum, lr_off, _), _ = jax.lax.scan(body, (mask, row_sum, col_sum, off0, on0), order, unroll=unroll)
    return (mask, rsum, csum, lr_off) if with_lr else (mask, rsum, csum)


def poisson_small(key, rates, cap: int = 24):
    """Poisson draws for rates ≤ 1 (the rates of eq. 30, 33 are probabilities) by inverse CDF over
    0..cap (P(X > 24) < 1e-24 for a rate ≤ 1); loop-free, so cheap to compile."""
    k = jnp.arange(cap + 1, dtype=jnp.float32)
    r = jnp.clip(rates, 0.0, 1.0)[..., None]
    logpmf = k * jnp.log(jnp.maximum(r, TINY)) - r - gammaln(k + 1)
    pmf = jnp.where((r == 0) & (k > 0), 0.0, jnp.exp(logpmf))
    cdf = jnp.cumsum(pmf, axis=-1)
    u = jax.random.uniform(key, rates.shape, jnp.float32)[..., None] * cdf[..., -1:]
    return jnp.minimum(jnp.sum(cdf <= u, axis=-1), cap).astype(jnp.int32)


def _allocate(key_births, rates, owners_mask_shape, free, n_slots):
    """Poisson births: ``rates`` (R,) per owner; returns (owner index, slot index, ok) arrays of
    length ``n_slots`` placing the j-th birth in the j-th free slot, and the overflow count."""
    b = poisson_small(key_births, rates)
    cum = jnp.cumsum(b)
    total = cum[-1]
    n_free = jnp.sum(free)
    slots = jnp.argsort(~free, stable=True).astype(jnp.int32)  # free slots first, in order
    j = jnp.arange(n_slots, dtype=jnp.int32)
    owner = jnp.searchsorted(cum, j, side="right").astype(jnp.int32)
    ok = (j < total) & (j < n_free)
    owner = jnp.minimum(owner, owners_mask_shape - 1)
    return owner, slots, ok, jnp.maximum(total - n_free, 0)


def topic_step(key, state: State, tokens: Tokens, cfg: Config):
    """Topic activations (28)-(30) and Poisson births of new topics (30)."""
    k1, k2 = jax.random.split(key)
    D, K = cfg.n_docs, cfg.n_topics
    n_dk, n_d = state.n_dk, tokens.n_d
    alpha, eta, delta, sigma = state.alpha, state.eta, state.delta, cfg.sigma
    n_other = D - 1.0

    m0 = jnp.sum(state.theta_bar, 1, dtype=jnp.int32)
    lr_fn = lambda rows, m: log_ratio_add_empty(m, n_d[rows], alpha)  # eq. (29)-(30), by document
    prior = topic_prior_logodds(jnp.arange(D + 1), n_other, eta, delta, sigma)  # by other documents c
    forced = lambda rows, cols, m_o: n_dk[rows, cols] > 0
    allowed = lambda rows, cols, c_tot: c_tot > 0  # a dead slot is revived only by a birth
    tb, m, c, lr_m = diagonal_scan(k1, state.theta_bar, m0, jnp.sum(state.theta_bar, 0, dtype=jnp.int32), lr_fn,
                                   lambda cols, c_o: prior[c_o], forced, allowed, cfg.unroll, with_lr=True)
    # Births: document d draws Poisson(π̃_d) new topics, π̃_d of eq. (30) with c = 0 (lr_m: the
    # likelihood part at the document's m active topics, as the scan keeps it)
    rate = jax.nn.sigmoid(ibp_mass(n_other, eta, delta, sigma) + lr_m)
    owner, slots, ok, overflow = _allocate(k2, rate, D, c == 0, K)
    tb = (tb.astype(jnp.int8).at[owner, slots].add(ok.astype(jnp.int8)) > 0)
    return tb, overflow


def word_step(key, state: State, theta_bar, cfg: Config):
    """Word activations (31)-(34) and, with the infinite vocabulary, Poisson births of new words (33)."""
    k1, k2 = jax.random.split(key)
    V, W, K = cfg.n_rows, cfg.n_words, cfg.n_topics
    finite = cfg.vocabulary == "finite"
    live = jnp.any(theta_bar, axis=0)
    k_star = jnp.sum(live).astype(jnp.float32)
    phi_bar = state.phi_bar & live[None, :]  # a dead topic takes its words with it
    n_wk, n_k = state.n_wk, state.n_k
    beta, gamma, xi, zeta = state.beta, state.gamma, state.xi, cfg.zeta

    if finite:  # "assign at least one vocabulary word to every topic" (sec. 4.2)
        forced = lambda rows, cols, m_o: (n_wk[rows, cols] > 0) | ((m_o == 0) & live[cols])
        allowed = lambda rows, cols, c_tot: live[cols]
    else:
        forced = lambda rows, cols, m_o: n_wk[rows, cols] > 0
        # a word row with no live topic is a "new" word: only births (33) create it
        allowed = lambda rows, cols, c_tot: live[cols] & (c_tot > 0)

    # The scan runs on the transposed view: rows of the scan = topics (customers), so that the
    # row sum is M_k (words of the topic) and the column sum c_v (topics of the word).
    # The log odds (31)-(34): likelihood part by topic (its other active words m, its tokens n_k),
    # prior part by the word's other live topics c.
    M0 = jnp.sum(phi_bar, 0, dtype=jnp.int32)
    lr_fn = lambda rows, m: log_ratio_add_empty(m, n_k[rows], beta)
    prior = word_prior_logodds(jnp.arange(K + 1), k_star, gamma, xi, zeta, W, finite)
    pbT, M, c, lr_M = diagonal_scan(
        k1, phi_bar.T, M0, jnp.sum(phi_bar, 1, dtype=jnp.int32), lr_fn, lambda cc, c_o: prior[c_o],
        lambda r, cc, m_o: forced(cc, r, m_o), lambda r, cc, c_tot: allowed(cc, r, c_tot), cfg.unroll, with_lr=True,
    )
    phi_bar = pbT.T
    overflow = jnp.int32(0)
    if not finite:
        rate = jax.nn.sigmoid(ibp_mass(k_star - 1.0, gamma, xi, zeta) + lr_M)  # lr_M: lr_fn at M, kept by the scan
        rate = jnp.where(live, rate, 0.0)
        free = (c == 0) & (jnp.arange(V) >= W)
        owner, slots, ok, overflow = _allocate(k2, rate, K, free, V - W)
        phi_bar = phi_bar.astype(jnp.int8).at[slots[: V - W], owner].add(ok.astype(jnp.int8)) > 0
    return phi_bar, overflow


