"""The fused C++ kernels of the PTM GEM step (topicjax.ptm.kernels) against float64 numpy loops
written from the definitions, against the pure-JAX versions (the XLA fallback), and against
themselves at other thread counts.

Definitions (2014 eq. 5, 6, 9, 31), per document d and word w with count n_dw, effective topics
B (N, P) and proportions a (D, P) (zero outside the active topics):

    p_dw = max(Σ_j B_wj a_dj, TINY),  ll_d = Σ_w n_dw log p_dw,  g_wj = Σ_d (n_dw / p_dw) a_dj,
    s1_dj = Σ_w n_dw B_wj / p_dw,     s2_dj = Σ_w min(n_dw / p_dw², CAP) B_wj²  (n_dw (B_wj / p_dw)² capped),

and a trial flip changes a document's likelihood by dL = Σ_w n_dw log(p⁺_dw / p_dw) at its trial
proportions a⁺: (1 - t) a + t e_j to turn topic j on (t maximising dL), a (1 - e_j) / (1 - a_j)
(variant 0) or uniform over the other active topics (variant 1) to turn one off.

The layouts are built from the printed row structure with small widths and blocks (several rows
per document and per word, documents and words without any rows, whole padding chunks).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from topicjax.core import kernels as core_kernels
from topicjax.ptm import gem
from topicjax.ptm import kernels as pk
from topicjax.ptm.layout import PTMData, build_layout

needs_kernel = pytest.mark.skipif(not core_kernels.available(),
                                  reason=f"kernel not built ({core_kernels.load_error()})")
TINY, CAP = gem.TINY, gem.RATIO_CAP


@pytest.fixture(autouse=True)
def _restore():
    yield
    core_kernels.set_threads()


# ------------------------------------------------------------------------------ inputs
def make_data(dense, *, doc_width=3, word_width=2, block_tokens=12, extra_chunks=1):
    """PTMData of a dense (D, N) count matrix (empty documents and words allowed) with
    ``extra_chunks`` whole chunks of padding rows appended to both layouts."""
    dense = np.asarray(dense)
    D, N = dense.shape
    d_idx, w_idx = np.nonzero(dense)
    d_off = np.concatenate([[0], np.cumsum(np.bincount(d_idx, minlength=D))])
    docs, words = build_layout(d_off, w_idx.astype(np.int32), dense[d_idx, w_idx], N, doc_width=doc_width,
                               word_width=word_width, block_tokens=block_tokens, extra_chunks=extra_chunks)
    wc = dense.sum(0).astype(np.float64)
    return PTMData(docs, words, jnp.asarray(dense.sum(1), jnp.int32), jnp.asarray(wc / wc.sum(), jnp.float32))


def random_case(seed, D=23, N=17, P=5, max_active=3, zeros=True):
    """Counts with an empty document and an absent word; proportions on 1..max_active active
    topics; with ``zeros``, B has zeros and a token whose active topics all have B = 0 (p
    clamps to TINY), else B > 0 (as PTM's effective topics are on every corpus word)."""
    rng = np.random.default_rng(seed)
    dense = rng.poisson(1.2, size=(D, N)) * (rng.random((D, N)) < 0.5)
    dense[3] = 0  # an empty document: no rows at all
    dense[:, N - 2] = 0  # a word in no document
    dense[5, :8] = rng.integers(1, 4, 8)  # a long document: several rows
    B = rng.random((N, P)) * (rng.random((N, P)) < (0.8 if zeros else 2.0)) + (0.0 if zeros else 0.01)
    B = (B / np.maximum(B.sum(0, keepdims=True), 1e-12)).astype(np.float32)
    vv = np.zeros((D, P), bool)
    for d in range(D):
        m = int(rng.integers(1, max_active + 1))
        vv[d, rng.choice(P, m, replace=False)] = True
    a = rng.random((D, P)) * vv
    a = (a / a.sum(1, keepdims=True)).astype(np.float32)
    # a token with p = 0 before the clamp: doc 0's first word has no mass in doc 0's topics
    if zeros:
        w0 = int(np.flatnonzero(dense[0])[0]) if dense[0].any() else 0
        dense[0, w0] = max(dense[0, w0], 1)
        B[w0, vv[0]] = 0.0
    return dense, B, a, vv


def ref_estep(dense, B, a):
    B, a = B.astype(np.float64), a.astype(np.float64)
    D, N = dense.shape
    P = B.shape[1]
    g, ll, s1, s2 = np.zeros((N, P)), np.zeros(D), np.zeros((D, P)), np.zeros((D, P))
    for d in range(D):
        for w in range(N):
            n = float(dense[d, w])
            if n == 0:
                continue
            p = max(float(B[w] @ a[d]), TINY)
            ll[d] += n * np.log(p)
            s1[d] += n * B[w] / p
            s2[d] += min(n / p ** 2, CAP) * B[w] ** 2
            g[w] += n / p * a[d]
    return g, ll, s1, s2


def doc_delta(dense_row, B, a_old, a_new, norm=1.0):
    """Σ_w n_w log(p⁺_w / p_w) in float64 (the exact change of one document's log-likelihood) with
    p⁺ = B a_new / norm.  Where a token's new probability is zero the ratio B a_new / p is
    clamped at TINY before dividing by ``norm`` (the kernels' convention for a flip that leaves
    a token no mass)."""
    B = B.astype(np.float64)
    keep = dense_row > 0
    p_old = np.maximum(B[keep] @ a_old.astype(np.float64), TINY)
    ratio = np.maximum(B[keep] @ a_new.astype(np.float64) / p_old, TINY) / norm
    return float(np.sum(dense_row[keep] * np.log(ratio)))


def candidates(rng, vv, n_on, n_off):
    """Per document: n_on inactive topics to turn on, n_off active ones to turn off (repeating
    the last when a document has fewer), and Newton starts, some of them unusable (0 or 1)."""
    D, P = vv.shape
    cand = np.zeros((D, n_on + n_off), np.int32)
    for d in range(D):
        off_ = rng.permutation(np.flatnonzero(vv[d]))
        on_ = rng.permutation(np.flatnonzero(~vv[d]))
        cand[d, :n_on] = np.resize(on_, n_on) if on_.size else 0
        cand[d, n_on:] = np.resize(off_, n_off)
    t_start = rng.choice([0.0, 0.05, 0.3, 0.99], size=cand.shape).astype(np.float32)
    return cand, t_start


# ------------------------------------------------------------------------------ jitted calls
@jax.jit
def estep_ffi(data, B, a):
    return pk.estep_sums(data, B, a, tiny=TINY, cap=CAP, xla=None)


estep_xla = jax.jit(gem.estep_sums_xla)


def trials(data, B, a, vv, cand, t_start, n_on, xla: bool):
    fn = gem.trial_deltas_xla if xla else lambda *args, **kw: pk.trial_deltas(*args, tiny=TINY, cap=CAP, xla=None,
                                                                               **kw)
    f = jax.jit(lambda *args: fn(*args, n_on=n_on, newton_iters=8))
    return [np.asarray(x) for x in f(data, jnp.asarray(B), jnp.asarray(a), jnp.asarray(vv, jnp.float32),
                                      jnp.asarray(cand), jnp.asarray(t_start))]


def ffi_backend():
    return core_kernels.backend("ffi")


# ------------------------------------------------------------------------------ E-step
@needs_kernel
@pytest.mark.parametrize("P,max_active,widths", [(1, 1, (2, 2)), (5, 3, (3, 2)), (12, 4, (16, 16)), (40, 2, (4, 3))])
def test_estep_equals_float64_loop_and_xla(P, max_active, widths):
    dense, B, a, _ = random_case(P, P=P, max_active=max_active)
    data = make_data(dense, doc_width=widths[0], word_width=widths[1], block_tokens=4 * widths[0])
    g_r, ll_r, s1_r, s2_r = ref_estep(dense, B, a)
    with ffi_backend():
        g, ll, s1, s2 = [np.asarray(x) for x in estep_ffi(data, jnp.asarray(B), jnp.asarray(a))]
        assert "topicjax_ptm_estep" in estep_ffi.lower(data, jnp.asarray(B), jnp.asarray(a)).as_text()
    big = s1_r > 1e20  # the clamped token's ratios: relative comparison only
    np.testing.assert_allclose(ll, ll_r, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(g, g_r, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(s1, s1_r, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(s2, s2_r, rtol=2e-5, atol=1e-4)
    assert big.any() == (P > 1 or bool(big.any()))
    # empty document, absent word: zero sums
    assert ll[3] == 0 and not s1[3].any() and not g[dense.shape[1] - 2].any()
    gx, llx, s1x, s2x = [np.asarray(x) for x in estep_xla(data, jnp.asarray(B), jnp.asarray(a))]
    for k, x in zip((g, ll, s1, s2), (gx, llx, s1x, s2x)):
        np.testing.assert_allclose(k, x, rtol=2e-5, atol=1e-4)


@needs_kernel
def test_estep_threads_give_the_same_bits():
    dense, B, a, _ = random_case(7, D=300, N=60, P=9)
    data = make_data(dense, doc_width=4, word_width=4, block_tokens=32)
    outs = []
    with ffi_backend():
        for n in (1, 2, 3, 1):
            core_kernels.set_threads(n)
            outs.append([np.asarray(x) for x in estep_ffi(data, jnp.asarray(B), jnp.asarray(a))])
    for o in outs[1:]:
        for x, y in zip(outs[0], o):
            np.testing.assert_array_equal(x, y)


@needs_kernel
def test_estep_under_vmap_equals_separate_calls():
    dense, B, a, _ = random_case(11, P=6)
    data = make_data(dense)
    B2 = np.stack([B, B[::-1].copy()])
    a2 = np.stack([a, a[::-1].copy()])
    with ffi_backend():
        both = jax.vmap(estep_ffi, in_axes=(None, 0, 0))(data, jnp.asarray(B2), jnp.asarray(a2))
        for i in range(2):
            one = estep_ffi(data, jnp.asarray(B2[i]), jnp.asarray(a2[i]))
            for x, y in zip(both, one):
                np.testing.assert_array_equal(np.asarray(x)[i], np.asarray(y))


@needs_kernel
def test_estep_bad_word_id_is_reported():
    dense, B, a, _ = random_case(3)
    data = make_data(dense)
    bad = data._replace(docs=data.docs._replace(other=data.docs.other.at[0, 0, 0].set(10_000)))
    with ffi_backend(), pytest.raises(Exception, match="word id 10000"):
        jax.block_until_ready(estep_ffi(bad, jnp.asarray(B), jnp.asarray(a)))


# ------------------------------------------------------------------------------ trial flips
# A flip that leaves a token no mass (B = 0 on every remaining active topic) is not compared:
# both versions compute its change from 1 - a_j b_j / p, which is then round-off instead of 0.  It
# cannot occur in PTM, whose effective topics are positive on every corpus word (β0 > 0), unless
# an M-step sets a switched-on β_jw to 0.
def check_trials_against_definition(dense, B, a, vv, cand, n_on, out):
    dl, t, variant, s1, s2 = out
    D = dense.shape[0]
    _, _, s1_r, s2_r = ref_estep(dense, B, a)
    np.testing.assert_allclose(s1, s1_r, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(s2, s2_r, rtol=2e-5, atol=1e-4)
    checked, gaps = 0, []
    for d in range(D):
        row = dense[d].astype(np.float64)
        L = row.sum()
        if L == 0:
            assert not dl[d].any() and not t[d].any()
            continue
        if np.any((B[row > 0][:, vv[d]] @ a[d][vv[d]]) <= 0):
            continue  # a clamped token: the change is dominated by log TINY, covered by the XLA comparison
        m = int(vv[d].sum())
        tol = 2e-4 * L + 1e-3
        for k, j in enumerate(cand[d]):
            if k < n_on:
                if vv[d, j]:
                    continue  # not a flip (a document with every topic active)
                e = np.zeros_like(a[d], np.float64)
                e[j] = 1.0
                f = lambda s: doc_delta(row, B, a[d], (1 - s) * a[d] + s * e)
                assert 0.0 <= t[d, k] <= pk.T_MAX
                # the reported change is the change at the reported t, and t is the best
                np.testing.assert_allclose(dl[d, k], max(f(float(t[d, k])), 0.0), rtol=1e-4, atol=tol)
                best = minimize_scalar(lambda s: -f(s), bounds=(0.0, pk.T_MAX), method="bounded",
                                       options=dict(xatol=1e-10))
                # near t = 1 the bracketed search (2 EM + 8 Newton or bisection steps, the same
                # in the XLA version) stops short of the optimum by a little
                gap = max(-best.fun, 0.0) - dl[d, k]
                gaps.append(gap / max(-best.fun, 1.0))
                assert gap <= tol + 2e-3 * abs(best.fun)
            else:
                if m < 2:
                    continue
                others = vv[d].copy()
                others[j] = False
                d0 = doc_delta(row, B, a[d], np.where(others, a[d], 0.0), 1.0 - a[d, j]) \
                    if 1.0 - a[d, j] > 1e-6 else -np.inf
                d1 = doc_delta(row, B, a[d], others.astype(np.float64), m - 1.0)
                want_uniform = m == 2 or d1 > d0
                if m > 2 and abs(d1 - d0) < tol:
                    want_uniform = bool(variant[d, k])  # a near tie: either is right
                assert variant[d, k] == int(want_uniform), (d, k)
                np.testing.assert_allclose(dl[d, k], d1 if want_uniform else d0, rtol=1e-4, atol=tol)
                assert t[d, k] == 0
            checked += 1
    assert checked > 20
    assert np.median(gaps) < 1e-5  # most trial flips find the optimum


@needs_kernel
@pytest.mark.parametrize("P,max_active,n_on,n_off", [(3, 2, 1, 1), (6, 3, 2, 2), (10, 4, 3, 2)])
def test_trial_deltas_equal_the_definition_and_xla(P, max_active, n_on, n_off):
    rng = np.random.default_rng(P)
    dense, B, a, vv = random_case(100 + P, D=30, P=P, max_active=max_active, zeros=False)
    cand, t_start = candidates(rng, vv, n_on, n_off)
    data = make_data(dense, doc_width=3, word_width=2, block_tokens=9)
    with ffi_backend():
        out = trials(data, B, a, vv, cand, t_start, n_on, xla=False)
    check_trials_against_definition(dense, B, a, vv, cand, n_on, out)
    ref = trials(data, B, a, vv, cand, t_start, n_on, xla=True)
    dl, t, variant, s1, s2 = out
    dlx, tx, variantx, s1x, s2x = ref
    np.testing.assert_allclose(s1, s1x, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(s2, s2x, rtol=2e-5, atol=1e-4)
    # turning off a document's only topic is never allowed (bic.v_flip_costs): its value, log of
    # a round-off difference, is not compared
    used = np.ones_like(dl, bool)
    used[:, n_on:] = vv.sum(1, keepdims=True) >= 2
    fin = np.isfinite(dlx) & used
    np.testing.assert_array_equal(np.isfinite(dl) & used, fin)
    L = dense.sum(1, keepdims=True) * np.ones_like(dl)
    err = np.abs(dl[fin] - dlx[fin])
    assert np.all(err <= 1e-3 * np.abs(dlx[fin]) + 1e-3 + 1e-4 * L[fin]), err.max()
    np.testing.assert_allclose(t, tx, atol=2e-3)
    np.testing.assert_array_equal(variant, variantx)


@needs_kernel
def test_trial_deltas_threads_give_the_same_bits():
    rng = np.random.default_rng(5)
    dense, B, a, vv = random_case(55, D=400, N=50, P=8, zeros=False)
    cand, t_start = candidates(rng, vv, 2, 2)
    data = make_data(dense, doc_width=4, word_width=4, block_tokens=32)
    outs = []
    with ffi_backend():
        for n in (1, 2, 3):
            core_kernels.set_threads(n)
            outs.append(trials(data, B, a, vv, cand, t_start, 2, xla=False))
    for o in outs[1:]:
        for x, y in zip(outs[0], o):
            np.testing.assert_array_equal(x, y)


@needs_kernel
def test_trial_deltas_bad_candidate_is_reported():
    rng = np.random.default_rng(1)
    dense, B, a, vv = random_case(9)
    cand, t_start = candidates(rng, vv, 1, 1)
    cand[2, 1] = 99
    with ffi_backend(), pytest.raises(Exception, match="candidate topic 99"):
        trials(make_data(dense), B, a, vv, cand, t_start, 1, xla=False)


# ------------------------------------------------------------------------------ flip ranking
@needs_kernel
@pytest.mark.parametrize("n,k", [(1, 1), (50, 7), (50, 60), (1000, 25)])
def test_smallest_negatives_equal_a_stable_sort(n, k):
    rng = np.random.default_rng(n + k)
    x = rng.normal(size=n).astype(np.float32)
    x[rng.random(n) < 0.2] = -1.5  # ties: lower index first
    x[rng.random(n) < 0.05] = np.inf
    x[rng.random(n) < 0.05] = -np.inf  # not finite: never listed
    x[rng.random(n) < 0.05] = np.nan
    with ffi_backend():
        vals, idx = jax.jit(pk.smallest_negatives, static_argnums=1)(jnp.asarray(x), k)
    vals, idx = np.asarray(vals), np.asarray(idx)
    keep = np.flatnonzero(np.isfinite(x) & (x < 0))
    order = keep[np.argsort(x[keep], kind="stable")][:k]
    m = order.size
    np.testing.assert_array_equal(idx[:m], order)
    np.testing.assert_array_equal(vals[:m], x[order])
    assert np.all(vals[m:] == np.inf) and np.all(idx[m:] == 0)
    # the XLA version (top_k) agrees on the prefix the callers use (they ask for k <= n)
    if k <= n:
        with core_kernels.backend("xla"):
            xv, xi = pk.smallest_negatives(jnp.asarray(np.where(np.isnan(x) | (x == -np.inf), np.inf, x)), k)
        np.testing.assert_array_equal(np.asarray(xi)[:m], order)
        np.testing.assert_array_equal(np.asarray(xv)[:m], x[order])


# ------------------------------------------------------------------------------ whole GEM step
@needs_kernel
def test_gem_fit_with_kernels_equals_xla_fit():
    """A PTM fit on bars picks the same switches with either backend and its BIC agrees to
    float32 round-off (the kernels sum in another order than XLA)."""
    import topicjax as tj
    from topicjax.ptm import PTM

    # the corpus and settings of tests/ptm/test_ptm.py's ``fitted`` model: in a run that has fitted
    # it, the kernels' fit loads its compiled programs from the shared persistent cache
    corpus, _, _ = tj.datasets.make_bars(n_docs=120, seed=0, doc_length=60)
    fits = {}
    for name in ("ffi", "xla"):
        with core_kernels.backend(name):
            fits[name] = PTM(n_components=6, bic="2014-exact", max_iter=15, random_state=0, progress=False).fit(corpus)
    a, b = fits["ffi"], fits["xla"]
    np.testing.assert_array_equal(a.u_, b.u_)
    np.testing.assert_array_equal(a.v_, b.v_)
    np.testing.assert_allclose(a.bic_, b.bic_, rtol=1e-5)
