"""The PTM BICs (2014 eq. 26 / sec. 7.4, 2020 eq. 16) and their trial-flip deltas against direct,
term-by-term float64 references written with loops (independent of the vectorised code)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from topicjax.core import layout as core_layout
from topicjax.ptm import gem, layout
from topicjax.ptm import bic as pb
from topicjax.data.corpus import Corpus

KINDS = ("2014", "2014-exact", "2020", "2020-printed")
# jit the vectorised functions once (eager dispatch would compile every primitive separately)
u_flip_deltas = jax.jit(pb.u_flip_deltas_2014, static_argnums=(5,))
select_2014 = jax.jit(pb.select_u_flips_2014, static_argnames=("kind", "n_candidates"))
select_2020 = jax.jit(pb.select_u_flips_2020, static_argnames=("n_candidates", "kind"))
configs_2020 = jax.jit(pb.u_word_configs_2020, static_argnames=("kind",))
e_step = jax.jit(gem.e_step)
D, N, M, P = 14, 12, 4, 8  # P > M: padded topics are masked everywhere


# ----------------------------------------------------------------------------- references
def random_corpus(seed, n_docs=D, n_words=N, zero_word=True):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.9, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < 0.6)
    if zero_word:
        dense[:, -1] = 0  # a vocabulary word absent from the corpus: beta0 = 0
    for d in range(n_docs):
        if dense[d].sum() < 2:
            dense[d, rng.integers(0, n_words - 1, 2)] += 1
    return Corpus.from_dense(dense), dense


def random_params(seed, dense, n_topics=M):
    """Random switches and parameters satisfying all constraints (paper orientation)."""
    rng = np.random.default_rng(seed + 100)
    Dn, Nn = dense.shape
    beta0 = dense.sum(0) / dense.sum()
    ok_words = np.flatnonzero(beta0 > 0)
    u = (rng.random((n_topics, Nn)) < 0.45) & (beta0 > 0)[None, :]
    for j in range(n_topics):
        if not u[j].any():
            u[j, rng.choice(ok_words)] = True
    v = rng.random((n_topics, Dn)) < 0.35
    for d in range(Dn):
        if not v[:, d].any():
            v[rng.integers(n_topics), d] = True
    for j in range(n_topics):
        if not v[j].any():
            v[j, rng.integers(Dn)] = True
    alpha = rng.random((n_topics, Dn)) * v
    alpha /= alpha.sum(0, keepdims=True)
    raw = rng.random((n_topics, Nn)) * u
    S = (u * beta0[None, :]).sum(1, keepdims=True)  # mass left to the specific words
    beta = raw / raw.sum(1, keepdims=True) * S
    return u, v, alpha, beta, beta0


def ref_loglik(dense, u, v, alpha, beta, beta0):
    """Eq. (5), one term at a time."""
    ll = 0.0
    Mn = u.shape[0]
    for d in range(dense.shape[0]):
        for n in range(dense.shape[1]):
            c = dense[d, n]
            if c == 0:
                continue
            p = 0.0
            for j in range(Mn):
                if v[j, d]:
                    p += alpha[j, d] * (beta[j, n] if u[j, n] else beta0[n])
            ll += c * math.log(p)
    return ll


def ref_cost(kind, dense, u, v):
    """Everything in the BIC except the likelihood: eq. (22)-(26), sec. 7.4, 2020 eq. (16)."""
    Mn, Nn = u.shape
    Dn = dense.shape[0]
    L = dense.sum(1)
    lbar = [sum(L[d] for d in range(Dn) if v[j, d]) for j in range(Mn)]
    c = Dn * math.log(Mn)
    for d in range(Dn):
        Md = int(v[:, d].sum())
        c += math.log(math.comb(Mn, Md)) + 0.5 * (Md - 1) * math.log(L[d] / (2 * math.pi))
    if kind in ("2014", "2014-exact"):
        for j in range(Mn):
            c += 0.5 * int(u[j].sum()) * math.log(lbar[j] / (2 * math.pi))
        if kind == "2014":
            p = u.sum() / (Mn * Nn)
            H = 0.0 if p in (0.0, 1.0) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
            c += Mn * Nn * H * math.log(2) - 0.5 * math.log(Mn * Nn)
        else:
            c += Mn * Nn * math.log(2)
    else:
        tot = sum(lbar)
        for n in range(Nn):
            k = int(u[:, n].sum())
            if k == 0:
                c += 0.5 * math.log(tot / (2 * math.pi))
            elif k == Mn:
                c += sum(0.5 * math.log(lbar[j] / (2 * math.pi)) for j in range(Mn))
            else:  # 2020 sec. 3.4: -log p(u_n) = M log 2 for the 2^M mixed rows; eq. 16 as printed omits it
                c += (Mn * math.log(2) if kind == "2020" else 0.0) + 0.5 * math.log(tot / (2 * math.pi))
                c += sum(0.5 * math.log(lbar[j] / (2 * math.pi)) for j in range(Mn) if u[j, n])
    return c


def ref_bic(kind, dense, u, v, alpha, beta, beta0):
    return ref_cost(kind, dense, u, v) - ref_loglik(dense, u, v, alpha, beta, beta0)


def ref_q(x, u, beta0):
    """Word part of the expected complete-data log-likelihood (7) with beta re-estimated by
    (9)-(10) for the switches u, from the E-step counts x."""
    q = 0.0
    for j in range(u.shape[0]):
        xbar = sum(x[j, n] for n in range(u.shape[1]) if u[j, n])
        mu = xbar / (1.0 - sum(beta0[n] for n in range(u.shape[1]) if not u[j, n]))
        for n in range(u.shape[1]):
            if x[j, n] == 0:
                continue
            q += x[j, n] * math.log(x[j, n] / mu if u[j, n] else beta0[n])
    return q


def ref_expected_bic(kind, dense, u, v, x, beta0):
    """The expected complete-data BIC up to terms that do not depend on u (2014 sec. 6.1)."""
    return ref_cost(kind, dense, u, v) - ref_q(x, u, beta0)


def padded(u, v, alpha, beta):
    """Device arrays in the internal orientation with P - M padded topics."""
    Mn = u.shape[0]
    pad = lambda a, fill=0: np.concatenate([a, np.full((P - Mn,) + a.shape[1:], fill, a.dtype)])
    return (jnp.asarray(pad(u)), jnp.asarray(pad(v).T), jnp.asarray(pad(alpha).T, jnp.float32),
            jnp.asarray(pad(beta), jnp.float32), jnp.asarray(np.arange(P) < Mn))


def lbar_of(dense, v):
    L = dense.sum(1)
    return np.concatenate([(v * L[None, :]).sum(1), np.zeros(P - v.shape[0])]).astype(np.int32)


@pytest.fixture(scope="module")
def case():
    corpus, dense = random_corpus(0)
    u, v, alpha, beta, beta0 = random_params(0, dense)
    rng = np.random.default_rng(7)
    x = rng.gamma(1.0, 2.0, size=(M, N)) * (rng.random((M, N)) < 0.8)
    x[:, beta0 == 0] = 0.0
    return dict(corpus=corpus, dense=dense, u=u, v=v, alpha=alpha, beta=beta, beta0=beta0, x=x)


# ----------------------------------------------------------------------------- numerics
def test_compensated_cumsum_and_stable_differences():
    rng = np.random.default_rng(1)
    x = np.concatenate([[1e6], rng.normal(0, 1, 3000), [-1e6], rng.normal(0, 1e-3, 3000)]).astype(np.float32)
    hi, lo = pb.cumsum_compensated(jnp.asarray(x))
    exact = np.cumsum(x.astype(np.float64))
    naive = np.cumsum(x)
    err = np.abs(np.asarray(hi, np.float64) + np.asarray(lo, np.float64) - exact).max()
    assert err < 1e-3 < np.abs(naive - exact).max()
    a = np.array([0.0, 0.0, 1.0, 3.0, 1e6, 2e6, 5.0], np.float32)
    d = np.array([2.0, 0.0, -1.0, 1e-3, 1.0, -1.0, -5.0], np.float32)
    f = lambda z: np.where(z > 0, z * np.log(np.where(z > 0, z, 1)), 0.0)
    want = f(a.astype(np.float64) + d) - f(a.astype(np.float64))
    np.testing.assert_allclose(np.asarray(pb.xlogx_diff(jnp.asarray(a), jnp.asarray(d))), want, rtol=2e-6, atol=1e-6)
    # entropy change of one more "on" switch among T (2014 eq. 27) vs float64
    n0, T = 4000.0, 200000.0
    h = lambda k: T * (-(k / T) * math.log(k / T) - (1 - k / T) * math.log(1 - k / T))
    for c in (1.0, -1.0, 37.0):
        got = float(pb.entropy_delta(jnp.float32(n0), jnp.float32(T), jnp.float32(c)))
        assert got == pytest.approx(h(n0 + c) - h(n0), rel=1e-5)


# ----------------------------------------------------------------------------- the BIC
@pytest.mark.parametrize("kind", KINDS)
def test_bic_equals_term_by_term_reference(case, kind):
    c = case
    for seed in (0, 1):
        u, v, alpha, beta, beta0 = (c["u"], c["v"], c["alpha"], c["beta"], c["beta0"]) if seed == 0 else random_params(5, c["dense"])
        want = ref_bic(kind, c["dense"], u, v, alpha, beta, beta0)
        uj, vj, aj, bj, tm = padded(u, v, alpha, beta)
        data = core_layout.prepare(c["corpus"], chunk=256)
        got = pb.bic(data, jnp.asarray(c["dense"].sum(1), jnp.int32), uj, vj, aj, bj, jnp.asarray(beta0, jnp.float32), tm, kind=kind)
        assert got == pytest.approx(want, rel=1e-6, abs=1e-3)
        # the GEM's own path: per-document log-likelihood from the PTM E-step, costs on the device
        pdata = layout.ptm_data(c["corpus"])
        x, ll, s1, s2 = e_step(pdata, uj, bj, aj, vj, tm)
        z = jnp.zeros((), jnp.int32)
        state = gem.PTMState(bj, uj, aj, vj, tm, x, ll, s1, s2, z, z, z)
        assert gem.state_bic(state, pdata, kind) == pytest.approx(want, rel=1e-6, abs=1e-3)


def test_printed_eq16_differs_by_m_log_2_per_mixed_word(case):
    """The one departure between the two readings of 2020 eq. 16 (``docs/fidelity.md``): the printed
    form charges a mixed word (some but not all of its M switches on) ``M log 2`` less than the
    derivation of sec. 3.4, and nothing else changes; so the printed form makes large M cheaper
    wherever words are mixed, which is why it selects higher orders (20 Newsgroups and BBC)."""
    c = case
    u, v, alpha, beta, beta0 = c["u"], c["v"], c["alpha"], c["beta"], c["beta0"]
    k = u.sum(0)
    n_mixed = int(np.sum((k > 0) & (k < M)))
    assert n_mixed > 0  # the case has mixed words, so the difference is seen
    derived = ref_bic("2020", c["dense"], u, v, alpha, beta, beta0)
    printed = ref_bic("2020-printed", c["dense"], u, v, alpha, beta, beta0)
    assert derived - printed == pytest.approx(n_mixed * M * math.log(2), rel=1e-12)
    uj, vj, aj, bj, tm = padded(u, v, alpha, beta)
    data = core_layout.prepare(c["corpus"], chunk=256)
    got = {kind: pb.bic(data, jnp.asarray(c["dense"].sum(1), jnp.int32), uj, vj, aj, bj, jnp.asarray(beta0, jnp.float32),
                        tm, kind=kind) for kind in ("2020", "2020-printed")}
    assert got["2020"] - got["2020-printed"] == pytest.approx(n_mixed * M * math.log(2), rel=1e-5)


def test_exact_variant_replaces_the_u_prior_only(case):
    c = case
    args = (c["dense"], c["u"], c["v"], c["alpha"], c["beta"], c["beta0"])
    Mn, Nn = c["u"].shape
    p = c["u"].sum() / (Mn * Nn)
    H = -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    diff = ref_bic("2014-exact", *args) - ref_bic("2014", *args)
    assert diff == pytest.approx(Mn * Nn * math.log(2) - (Mn * Nn * H * math.log(2) - 0.5 * math.log(Mn * Nn)))
    assert pb.u_prior_2014(c["u"].sum(), Mn, Nn, "2014-exact") - pb.u_prior_2014(c["u"].sum(), Mn, Nn, "2014") == pytest.approx(diff)


def test_bad_kind():
    with pytest.raises(ValueError, match="bic must be one of"):
        pb.check_kind("2019")


# ----------------------------------------------------------------------------- word switches
@pytest.mark.parametrize("kind", ("2014", "2014-exact"))
def test_u_single_flip_deltas_equal_loop(case, kind):
    c = case
    u, v, x, beta0 = c["u"], c["v"], c["x"], c["beta0"]
    uj, vj, _, _, tm = padded(u, v, c["alpha"], c["beta"])
    xp = jnp.asarray(np.concatenate([x, np.zeros((P - M, N))]), jnp.float32)
    got = np.asarray(u_flip_deltas(xp, uj, jnp.asarray(beta0, jnp.float32), jnp.asarray(lbar_of(c["dense"], v)), tm, kind))
    base = ref_expected_bic(kind, c["dense"], u, v, x, beta0)
    assert np.all(np.isinf(got[M:]))
    for j in range(M):
        for n in range(N):
            u2 = u.copy()
            u2[j, n] = ~u2[j, n]
            if beta0[n] == 0 or u2[j].sum() == 0:
                assert np.isinf(got[j, n])
                continue
            want = ref_expected_bic(kind, c["dense"], u2, v, x, beta0) - base
            assert got[j, n] == pytest.approx(want, rel=1e-4, abs=2e-4), (j, n)


@pytest.mark.parametrize("kind,n_cand", [("2014", 10000), ("2014", 3), ("2014-exact", 10000), ("2020", 10000), ("2020", 2),
                                        ("2020-printed", 10000)])
def test_u_batch_change_is_exact_and_descends(case, kind, n_cand):
    c = case
    u, v, x, beta0 = c["u"], c["v"], c["x"], c["beta0"]
    uj, vj, _, _, tm = padded(u, v, c["alpha"], c["beta"])
    xp = jnp.asarray(np.concatenate([x, np.zeros((P - M, N))]), jnp.float32)
    lb = jnp.asarray(lbar_of(c["dense"], v))
    b0 = jnp.asarray(beta0, jnp.float32)
    if kind.startswith("2020"):
        u_new, k, change = select_2020(xp, uj, b0, lb, tm, n_candidates=n_cand, kind=kind)
    else:
        u_new, k, change = select_2014(xp, uj, b0, lb, tm, kind=kind, n_candidates=n_cand)
    u_new = np.asarray(u_new)
    assert not u_new[M:].any() and np.all(u_new[:M].sum(1) >= 1) and not u_new[:, beta0 == 0].any()
    assert 0 < int(k) <= n_cand and float(change) < 0
    want = ref_expected_bic(kind, c["dense"], u_new[:M], v, x, beta0) - ref_expected_bic(kind, c["dense"], u, v, x, beta0)
    assert float(change) == pytest.approx(want, rel=1e-4, abs=1e-3)


@pytest.mark.parametrize("kind", ("2020", "2020-printed"))
def test_u_2020_configurations_equal_brute_force(case, kind):
    """For every word, the best of all-off / all-on / best-mixed equals the best of all 2^M rows."""
    c = case
    u, v, x, beta0 = c["u"], c["v"], c["x"], c["beta0"]
    uj, vj, _, _, tm = padded(u, v, c["alpha"], c["beta"])
    xp = jnp.asarray(np.concatenate([x, np.zeros((P - M, N))]), jnp.float32)
    dbic, rows = configs_2020(xp, uj, jnp.asarray(beta0, jnp.float32), jnp.asarray(lbar_of(c["dense"], v)), tm, kind=kind)
    dbic, rows = np.asarray(dbic), np.asarray(rows)
    base = ref_expected_bic(kind, c["dense"], u, v, x, beta0)
    for n in range(N):
        if beta0[n] == 0:
            assert np.isinf(dbic[n])
            continue
        best = 0.0
        for bits in itertools.product([False, True], repeat=M):
            u2 = u.copy()
            u2[:, n] = bits
            if np.any(u2.sum(1) == 0):
                continue
            best = min(best, ref_expected_bic(kind, c["dense"], u2, v, x, beta0) - base)
        assert dbic[n] == pytest.approx(best, rel=1e-4, abs=2e-4), n
        u2 = u.copy()
        u2[:, n] = rows[:M, n]
        assert ref_expected_bic(kind, c["dense"], u2, v, x, beta0) - base == pytest.approx(best, rel=1e-4, abs=2e-4)


# ----------------------------------------------------------------------------- topic switches
def _state(c, u, v, alpha, beta):
    uj, vj, aj, bj, tm = padded(u, v, alpha, beta)
    data = layout.ptm_data(c["corpus"])
    x, ll, s1, s2 = e_step(data, uj, bj, aj, vj, tm)
    z = jnp.zeros((), jnp.int32)
    return gem.PTMState(bj, uj, aj, vj, tm, x, ll, s1, s2, z, z, z), data


def _doc_ll(dense_row, u, v_col, a_col, beta, beta0):
    return ref_loglik(dense_row[None, :], u, v_col[:, None], a_col[:, None], beta, beta0)


@pytest.mark.parametrize("kind", ("2014", "2020", "2020-printed"))
def test_v_flip_scores_equal_loop_over_single_flips(case, kind):
    c = case
    dense, u, v, alpha, beta, beta0 = c["dense"], c["u"], c["v"], c["alpha"], c["beta"], c["beta0"]
    state, data = _state(c, u, v, alpha, beta)
    scores, tt, var = (np.asarray(a) for a in gem.v_flip_scores(state, data, kind, newton_iters=20))
    assert np.all(np.isinf(scores[:, M:]))
    base = ref_bic(kind, dense, u, v, alpha, beta, beta0)
    t_max = 1.0 - 1e-6
    n_checked = 0
    for d in range(D):
        for j in range(M):
            v2 = v.copy()
            v2[j, d] = ~v2[j, d]
            if v[j, d] and (v[:, d].sum() == 1 or v[j].sum() == 1):
                assert np.isinf(scores[d, j]), (d, j)  # a document keeps a topic, a topic a document
                continue
            a2 = alpha.copy()
            if not v[j, d]:  # on: the line alpha -> e_j, at the kernel's t and at the optimum
                e = np.eye(M)[j]
                a2[:, d] = (1 - tt[d, j]) * alpha[:, d] + tt[d, j] * e
                f = lambda t: -_doc_ll(dense[d], u, v2[:, d], (1 - t) * alpha[:, d] + t * e, beta, beta0)
                opt = minimize_scalar(f, bounds=(0.0, t_max), method="bounded", options={"xatol": 1e-10})
                a_opt = alpha.copy()
                a_opt[:, d] = (1 - opt.x) * alpha[:, d] + opt.x * e
                best = ref_bic(kind, dense, u, v2, a_opt, beta, beta0) - base
                best = min(best, ref_bic(kind, dense, u, v2, alpha, beta, beta0) - base)  # t = 0
                assert scores[d, j] <= best + 1e-3
            else:  # off: renormalise or spread uniformly, whichever the kernel chose
                keep = v2[:, d].astype(float)
                ren = alpha[:, d] * keep / (1 - alpha[j, d])
                uni = keep / keep.sum()
                a2[:, d] = uni if var[d, j] == 1 else ren
                other = alpha.copy()
                other[:, d] = ren if var[d, j] == 1 else uni
                assert scores[d, j] <= ref_bic(kind, dense, u, v2, other, beta, beta0) - base + 1e-3
            want = ref_bic(kind, dense, u, v2, a2, beta, beta0) - base
            assert scores[d, j] == pytest.approx(want, rel=1e-4, abs=1e-3), (d, j)
            n_checked += 1
    assert n_checked > D


@pytest.mark.parametrize("kind", ("2014", "2020", "2020-printed"))
def test_v_batch_change_is_exact_and_descends(case, kind):
    c = case
    dense, u, v, alpha, beta, beta0 = c["dense"], c["u"], c["v"], c["alpha"], c["beta"], c["beta0"]
    state, data = _state(c, u, v, alpha, beta)
    v_new, a_new, k, change, _, _ = jax.jit(gem._v_round, static_argnums=(1, 2, 3, 4, 5))(
        data, kind, 3, 2, 8, 1000, state.u, state.beta, state.alpha, state.v, state.topic_mask, state.s1, state.s2)
    v_new = np.asarray(v_new)[:, :M].T
    a_new = np.asarray(a_new, np.float64)[:, :M].T
    assert int(k) > 1 and float(change) < 0
    assert np.all(v_new.sum(0) >= 1) and np.all(v_new.sum(1) >= 1)
    np.testing.assert_allclose(a_new.sum(0), 1.0, atol=1e-5)
    want = ref_bic(kind, dense, u, v_new, a_new, beta, beta0) - ref_bic(kind, dense, u, v, alpha, beta, beta0)
    assert float(change) == pytest.approx(want, rel=1e-4, abs=2e-3)
