"""Closed forms of topicjax.lida.ibp against the printed equations: the activation odds (29)-(34),
the three-parameter IBP (sec. 2.1, eq. 10, 13, 43) and the marginals (23)-(24)."""

from __future__ import annotations

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from scipy import integrate
from scipy.special import betaln, gammaln as g

from topicjax.lida import ibp
from topicjax.lida.hyper import count_histogram, loggamma_sum

ibp_ll = jax.jit(ibp.ibp_log_likelihood, static_argnums=(1, 5))
marg_z = jax.jit(ibp.log_marginal_z)
marg_w = jax.jit(ibp.log_marginal_w)
topic_lo = jax.jit(ibp.topic_activation_logodds)
word_lo = jax.jit(ibp.word_activation_logodds, static_argnames=("zeta", "n_words", "finite"))


def test_log_ratio_add_empty_is_ratio_of_marginals_23():
    """B(mα+n, α)/B(mα, α) equals p(z | m+1 active) / p(z | m active) from eq. (23)."""
    alpha = 0.37
    for m, n in [(1, 5), (3, 17), (7, 1)]:
        # document with n tokens on m active topics (counts arbitrary), plus one empty active topic
        counts = np.random.default_rng(m).multinomial(n, np.ones(m) / m)
        def lm(n_active):
            return g(n_active * alpha) - g(n_active * alpha + n) + np.sum(g(alpha + counts) - g(alpha))
        want = lm(m + 1) - lm(m)
        assert np.isclose(float(ibp.log_ratio_add_empty(m, n, alpha)), want, rtol=1e-4, atol=1e-5)
        assert np.isclose(want, betaln(m * alpha + n, alpha) - betaln(m * alpha, alpha), rtol=1e-8)
    assert float(ibp.log_ratio_add_empty(3, 0, alpha)) == 0.0
    assert float(ibp.log_ratio_add_empty(0, 4, alpha)) > 1e20


def test_topic_activation_matches_eq_29_30():
    D, alpha, eta, delta, sigma = 50, 0.4, 2.5, 1.7, 0.2
    for n_d, m, c in [(30, 2, 5), (8, 1, 1), (100, 6, 40)]:
        r = np.exp(betaln(m * alpha, alpha) - betaln(m * alpha + n_d, alpha))
        pi = 1.0 / (1.0 + r * (D - 1 - c + delta + sigma) / (c - sigma))  # eq. (29)
        lo = float(topic_lo(n_d, m, c, D - 1.0, alpha, eta, delta, sigma))
        assert np.isclose(1 / (1 + np.exp(-lo)), pi, rtol=1e-4)
        # eq. (30) for a topic used by this document only
        ratio = np.exp(betaln(m * alpha, alpha) - betaln(m * alpha + n_d, alpha) + g(D + delta) + g(delta + sigma)
                       - g(1 + delta) - g(D - 1 + delta + sigma))
        pi_new = eta / (eta + ratio)
        lo = float(topic_lo(n_d, m, 0, D - 1.0, alpha, eta, delta, sigma))
        assert np.isclose(1 / (1 + np.exp(-lo)), pi_new, rtol=1e-4)


def test_word_activation_matches_eq_32_33_and_finite_beta_bernoulli():
    K, beta, gamma, xi, zeta, W = 12, 0.05, 6.0, 2.0, 0.25, 40
    n_k, m, c = 30, 5, 3
    r = np.exp(betaln(m * beta, beta) - betaln(m * beta + n_k, beta))
    kappa = 1 / (1 + r * (K - 1 - c + xi + zeta) / (c - zeta))  # eq. (32)
    lo = float(word_lo(n_k, m, c, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=False))
    assert np.isclose(1 / (1 + np.exp(-lo)), kappa, rtol=1e-4)
    ratio = np.exp(betaln(m * beta, beta) - betaln(m * beta + n_k, beta) + g(K + xi) + g(xi + zeta) - g(1 + xi)
                   - g(K - 1 + xi + zeta))
    lo = float(word_lo(n_k, m, 0, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=False))
    assert np.isclose(1 / (1 + np.exp(-lo)), gamma / (gamma + ratio), rtol=1e-4)  # eq. (33)
    # finite vocabulary (34), zeta = 0: the prior part is the beta-Bernoulli predictive of the
    # finite model (16), computed here by quadrature of π against its Beta posterior.
    a = gamma * xi / W
    post = lambda p: p ** (a + c - 1) * (1 - p) ** (xi + (K - 1 - c) - 1)
    p1 = integrate.quad(lambda p: p * post(p), 0, 1)[0] / integrate.quad(post, 0, 1)[0]
    lo = float(word_lo(0, m, c, K, beta, gamma, xi, zeta=0.0, n_words=W, finite=True))
    assert np.isclose(1 / (1 + np.exp(-lo)), p1, rtol=1e-4)


def test_ibp_likelihood_43_one_parameter_closed_form_and_intensity_10():
    D, eta = 20, 2.3
    counts = np.array([1, 4, 20, 7, 0, 2])
    got = float(ibp_ll(counts, D, eta, 1.0, 0.0))
    H = np.sum(1.0 / np.arange(1, D + 1))
    c = counts[counts > 0]
    want = -eta * H + c.size * np.log(eta) + np.sum(g(D - c + 1) + g(c) - g(D + 1))  # Griffiths & Ghahramani
    assert np.isclose(got, want, rtol=1e-5)
    # three-parameter: independent loop over (43)
    delta, sigma = 0.6, 0.3
    j = np.arange(D)
    H3 = np.sum(np.exp(g(1 + delta) + g(j + delta + sigma) - g(j + 1 + delta) - g(delta + sigma)))
    want3 = -eta * H3 + c.size * np.log(eta) + sum(
        g(1 + delta) + g(D - ck + delta + sigma) + g(ck - sigma) - g(1 - sigma) - g(delta + sigma) - g(D + delta)
        for ck in c)
    assert np.isclose(float(ibp_ll(counts, D, eta, delta, sigma)), want3, rtol=1e-5)
    # intensity ε (10): closed forms used for the finite vocabulary vs the direct sum
    for s in (0.0, 0.3):
        direct = eta * np.sum(np.exp(g(1 + delta) + g(j + delta + s) - g(j + 1 + delta) - g(delta + s)))
        assert np.isclose(float(jnp.exp(ibp.log_ibp_intensity(D, eta, delta, s))), direct, rtol=1e-4)


def test_marginals_23_24_against_loops():
    rng = np.random.default_rng(0)
    n_dk = rng.integers(0, 4, (5, 6))
    tb = (n_dk > 0) | (rng.random((5, 6)) < 0.3)
    alpha = 0.7
    want = 0.0
    for d in range(5):
        m, n = tb[d].sum(), n_dk[d].sum()
        want += g(m * alpha) - g(m * alpha + n)
        want += sum(g(alpha + n_dk[d, k]) - g(alpha) for k in range(6) if tb[d, k])
    assert np.isclose(float(marg_z(jnp.asarray(n_dk), jnp.asarray(tb), alpha)), want, rtol=1e-5)
    n_wk = rng.integers(0, 3, (7, 4))
    M = np.array([7, 7, 7, 7])
    beta = 0.2
    want = sum(g(M[k] * beta) - g(M[k] * beta + n_wk[:, k].sum()) + np.sum(g(beta + n_wk[:, k]) - g(beta))
               for k in range(4))
    got = float(marg_w(jnp.asarray(n_wk), jnp.asarray(n_wk.sum(0)), jnp.asarray(M), beta))
    assert np.isclose(got, want, rtol=1e-5)
    # the histogram form used by the α, β updates
    hist = count_histogram(jnp.asarray(n_wk), 8)
    want = np.sum(np.where(n_wk > 0, g(beta + n_wk) - g(beta), 0.0))
    assert np.isclose(float(loggamma_sum(hist, beta)), want, rtol=1e-5)


def test_ibp_sample_expected_features_10_and_row_mass():
    """Draws of the three-parameter IBP (sec. 2.1): the number of features has mean ε of eq. (10)
    (direct sum in numpy) and every customer has η features on average."""
    D, eta, delta, sigma = 12, 2.5, 1.5, 0.3
    rng = np.random.default_rng(0)
    draws = [ibp.ibp_sample(rng, D, eta, delta, sigma) for _ in range(1500)]
    j = np.arange(D)
    eps = eta * np.sum(np.exp(g(1 + delta) + g(j + delta + sigma) - g(j + 1 + delta) - g(delta + sigma)))
    k_star = np.array([Z.shape[1] for Z in draws])
    assert abs(k_star.mean() - eps) < 4 * k_star.std() / np.sqrt(k_star.size), (k_star.mean(), eps)
    rows = np.array([Z.sum() / D for Z in draws])  # rows of one draw are dependent: average per draw
    assert abs(rows.mean() - eta) < 4 * rows.std() / np.sqrt(rows.size), (rows.mean(), eta)
    assert all(Z.any(0).all() for Z in draws)  # every feature has a customer
    with pytest.raises(ValueError, match="IBP parameters"):
        ibp.ibp_sample(rng, D, eta, -0.5, sigma)
    assert ibp.ibp_sample(rng, 30, 0.05, 1.0, 0.0, min_features=1).sum(1).min() == 1


def _finite_predictive(a, zeta, xi, c, n_other):
    """P(φ̄_vk = 1 | c of the n_other other topics use word v) in the finite model (16) with W words:
    π ~ p(π) ∝ π^(a − ζ − 1) (1 − π)^(ξ + ζ − 1), a = γξ/W, integrated against the Bernoulli
    likelihood of the other topics (quadrature)."""
    post = lambda p: p ** (a + c - zeta - 1) * (1 - p) ** (xi + zeta + (n_other - c) - 1)
    return integrate.quad(lambda p: p * post(p), 0, 1)[0] / integrate.quad(post, 0, 1)[0]


@pytest.mark.parametrize("zeta", [0.0, 0.25])
def test_finite_vocabulary_34_with_discount_against_beta_bernoulli(zeta):
    """Finite vocabulary, c >= 1 (eq. 34), with and without the discount ζ: the prior part of the
    odds is the beta-Bernoulli predictive of the finite model (16), computed here by quadrature,
    and the likelihood part is B(mβ + n_k, β)/B(mβ, β) (eq. 24).  The printed eq. (34) subtracts
    γξ/W once more in the odds' denominator, which does not follow from (13); the printed form is
    shown to miss the quadrature, and the docstring of ``word_activation_logodds`` says so."""
    K, beta, gamma, xi, W = 12, 0.05, 6.0, 2.0, 40
    a = gamma * xi / W
    for n_k, m, c in [(0, 3, 2), (30, 5, 3), (7, 1, 9)]:
        lr = betaln(m * beta + n_k, beta) - betaln(m * beta, beta)
        p = _finite_predictive(a, zeta, xi, c, K - 1)
        want = np.log(p / (1 - p)) + lr
        got = float(word_lo(n_k, m, c, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=True))
        assert np.isclose(got, want, rtol=1e-4, atol=1e-5), (n_k, m, c, got, want)
        printed = np.log((a + c - zeta) / (K - 1 - a - c + xi + zeta)) + lr  # eq. (34) as printed
        assert abs(printed - want) > 1e-3


@pytest.mark.parametrize("zeta", [0.0, 0.3])
def test_finite_vocabulary_new_word_c0_is_intensity_over_W(zeta):
    """Finite vocabulary, c = 0 (no other topic uses the word): eq. (14) for the word matrix, the
    prior probability ε / W with ε the expected number of distinct active words among K* topics,
    eq. (10) summed term by term here; times the likelihood ratio of eq. (24)."""
    K, beta, gamma, xi, W = 9, 0.1, 5.0, 1.5, 60
    j = np.arange(K)
    eps = gamma * np.sum(np.exp(g(1 + xi) + g(j + xi + zeta) - g(j + 1 + xi) - g(xi + zeta)))
    p0 = eps / W
    for n_k, m in [(0, 2), (25, 4)]:
        lr = betaln(m * beta + n_k, beta) - betaln(m * beta, beta)
        want = np.log(p0 / (1 - p0)) + lr
        got = float(word_lo(n_k, m, 0, K, beta, gamma, xi, zeta=zeta, n_words=W, finite=True))
        assert np.isclose(got, want, rtol=1e-4, atol=1e-5), (n_k, m, got, want)


@pytest.mark.parametrize("a", [0.0, 0.01, 0.1, 0.5, 1.0, 3.0, 100.0, 1e4])
def test_lgamma_diff_against_float64_gammaln(a):
    """ln Γ(x + a) − ln Γ(x) in float32 within 3e-6 of the float64 difference, relative (absolute
    below 1e-3), from tiny x through the switch to Stirling's series (x = 8) to x = 1e6."""
    xs = np.array([1e-3, 0.05, 0.5, 1.0, 3.0, 7.99, 8.0, 8.01, 20.0, 100.0, 1e3, 1.7e4, 1e6])
    ref = g(xs + a) - g(xs)
    got = np.asarray(ibp.lgamma_diff(xs.astype(np.float32), np.float32(a)), np.float64)
    np.testing.assert_array_less(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-3), 3e-6)


def test_activation_odds_keep_their_digits_at_corpus_scale():
    """The word-activation odds of a KOS-sized topic (M = 6000 active words, n_k = 17,000 tokens,
    β = 0.01) and the IBP mass at D = 3430 documents: float32 within 1e-6 of the float64 value.
    Four float32 gammaln calls of size 1.5e5 gave -0.0469 for -0.0566 (a 17 % error in the odds)."""
    m, n, b = 6000.0, 17000.0, 0.01
    ref = g((m + 1) * b) - g((m + 1) * b + n) - g(m * b) + g(m * b + n)
    assert float(ibp.log_ratio_add_empty(m, n, b)) == pytest.approx(ref, abs=1e-6)
    D, eta, delta, sigma = 3430.0, 5.0, 0.7, 0.2
    ref = np.log(eta) + g(1 + delta) + g(D - 1 + delta + sigma) - g(D + delta) - g(delta + sigma)
    assert float(ibp.ibp_mass(D - 1, eta, delta, sigma)) == pytest.approx(ref, abs=2e-6)
