"""The blocked Gibbs scan of the topic and word activations (:func:`topicjax.lida.masks.diagonal_scan`)
against its definition written out in numpy: every block's entries drawn from the log odds
evaluated afresh (no cache of the rows' likelihood parts), with the scan's own uniforms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax.lida.draw import token_uniform
from topicjax.lida.masks import diagonal_scan


def _written_out(key, mask, lr, prior, forced, allowed):
    """The scan by its definition: blocks s0, s0 + 1, ... (mod max(R, C)) of the entries (i, (i + s)
    mod C) (R <= C) or ((j + s) mod R, j), each entry's log odds lr(row, m_other) + prior(col,
    c_other) from the current sums, drawn with the scan's counter uniforms."""
    mask = np.array(mask, bool)
    R, C = mask.shape
    L, S = max(R, C), min(R, C)
    k_u, k_s = jax.random.split(key)
    seed = jax.random.bits(k_u, (), jnp.uint32)
    s0 = int(jax.random.randint(k_s, (), 0, L, dtype=jnp.int32))
    u = np.asarray(token_uniform(jnp.arange(L * S, dtype=jnp.int32), seed, 0)).reshape(L, S)
    for t in range(L):
        s = (t + s0) % L
        i = np.arange(S)
        rows, cols = (i, (i + s) % C) if R <= C else ((i + s) % R, i)
        cur = mask[rows, cols]
        m_o = mask.sum(1)[rows] - cur
        c_o = mask.sum(0)[cols] - cur
        lo = lr(rows, m_o) + prior(cols, c_o)
        new = u[s] < 1.0 / (1.0 + np.exp(-lo))
        new = (new | forced(rows, cols, m_o)) & allowed(rows, cols, mask.sum(0)[cols])
        mask[rows, cols] = new
    return mask


@pytest.mark.parametrize("shape", [(7, 12), (12, 5)])
def test_diagonal_scan_is_its_definition(shape):
    """Rows whose sums change are re-evaluated in chunks of ``cache_cap`` (1 and 3: several chunks
    a block; 64: one): the masks and sums equal the written-out scan; the log odds are steep
    enough in the row sum that a stale cached value would flip entries.  With ``with_lr`` the
    kept likelihood parts are those of the final row sums."""
    R, C = shape
    rng = np.random.default_rng(R * C)
    g = rng.normal(size=R)
    table = rng.normal(size=R + 2)
    lr_np = lambda r, m: 2.5 * np.log1p(m) - 1.2 * m + g[r]  # noqa: E731
    prior_np = lambda c, c_o: table[c_o] - 0.1 * c  # noqa: E731
    forced_np = lambda r, c, m_o: (m_o == 0) & (c == (r + 1) % C)  # noqa: E731
    allowed_np = lambda r, c, c_tot: c_tot < R - 1  # noqa: E731
    gj, tj_ = jnp.asarray(g, jnp.float32), jnp.asarray(table, jnp.float32)
    lr = lambda r, m: 2.5 * jnp.log1p(m.astype(jnp.float32)) - 1.2 * m + gj[r]  # noqa: E731
    prior = lambda c, c_o: tj_[c_o] - 0.1 * c  # noqa: E731
    forced = lambda r, c, m_o: (m_o == 0) & (c == (r + 1) % C)  # noqa: E731
    allowed = lambda r, c, c_tot: c_tot < R - 1  # noqa: E731
    mask0 = rng.random((R, C)) < 0.4
    key = jax.random.key(R + C)
    want = _written_out(key, mask0, lr_np, prior_np, forced_np, allowed_np)
    assert want.sum() > 0 and (want != mask0).sum() >= 5  # the scan moved entries
    m0 = jnp.asarray(mask0)
    sums = jnp.sum(m0, 1, dtype=jnp.int32), jnp.sum(m0, 0, dtype=jnp.int32)
    for cap in (1, 3, 64):
        mask, rsum, csum = jax.jit(lambda k, m, r, c: diagonal_scan(k, m, r, c, lr, prior, forced, allowed,
                                                                     cache_cap=cap))(key, m0, *sums)
        np.testing.assert_array_equal(np.asarray(mask), want, err_msg=f"cache_cap={cap}")
        np.testing.assert_array_equal(np.asarray(rsum), want.sum(1))
        np.testing.assert_array_equal(np.asarray(csum), want.sum(0))
    # the likelihood parts the scan keeps, at the final row sums (the births' rates read them)
    *_, lr_kept = jax.jit(lambda k, m, r, c: diagonal_scan(k, m, r, c, lr, prior, forced, allowed, cache_cap=3,
                                                           with_lr=True))(key, m0, *sums)
    np.testing.assert_allclose(np.asarray(lr_kept), lr_np(np.arange(R), want.sum(1)), rtol=1e-5, atol=1e-5)
