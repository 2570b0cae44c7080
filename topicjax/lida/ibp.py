"""Closed forms of the four-parameter IBP compound Dirichlet priors (sec. 2, 4): the activation
odds of eq. (29)-(34), the three-parameter IBP (sec. 2.1, eq. 10, 43) and the collapsed marginals
(23)-(24).  Pure functions of counts; every one is checked against the printed equation in
``tests/lida/test_ibp.py``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from .state import BIG, TINY

__all__ = ["lgamma_diff", "log_ratio_add_empty", "ibp_mass", "ibp_sample", "topic_activation_logodds",
           "word_activation_logodds", "topic_prior_logodds", "word_prior_logodds", "ibp_harmonic", "log_ibp_intensity", "ibp_log_likelihood",
           "log_marginal_z", "log_marginal_w"]


#: below this argument :func:`lgamma_diff` shifts x up by the recurrence Γ(x + 1) = x Γ(x)
_STIRLING_FROM = 8.0


def _lgamma_diff_stirling(x, a):
    # ln Γ(x + a) − ln Γ(x) from Stirling's series with the 1/(12 z) and 1/(360 z³) terms, every
    # piece written so that nothing large cancels: (x − ½) ln(1 + a/x) + a ln(x + a) − a
    # − a / (12 x (x + a)) + (1/x³ − 1/(x + a)³) / 360.  Truncation error < 1e-8 for x ≥ 8.
    xa = x + a
    return ((x - 0.5) * jnp.log1p(a / x) + a * jnp.log(xa) - a - a / (12.0 * x * xa)
            + (1.0 / x ** 3 - 1.0 / xa ** 3) / 360.0)


def lgamma_diff(x, a):
    """ln Γ(x + a) − ln Γ(x) for x > 0, a ≥ 0, accurate to a few float32 ulps of *the
    difference*.

    Written as two ``gammaln`` calls it loses everything when x is large and a small: on KOS a
    topic's word-activation odds (eq. 32-34) are such a difference at x = M β + n_k ≈ 1.7e4, whose
    ``gammaln`` is 1.5e5 with a float32 ulp of 0.016, against a result of about 0.05; the computed
    odds were off by up to 0.03 in the log and the CPU and the GPU drew 161 of 165,744 word masks
    differently from the same uniforms.  Here: for x ≥ 8 Stirling's series of the difference
    (:func:`_lgamma_diff_stirling`); below, x is first raised to x + k ≥ 8 with
    ln Γ(x + a) − ln Γ(x) = D(x + k, a) − Σ_{i<k} ln(1 + a / (x + i)).
    """
    x = jnp.asarray(x, jnp.float32)
    a = jnp.asarray(a, jnp.float32)
    steps = jnp.clip(jnp.ceil(_STIRLING_FROM - x), 0.0, _STIRLING_FROM)
    shift = jnp.zeros_like(x + a)
    for i in range(int(_STIRLING_FROM)):
        shift = shift + jnp.where(i < steps, jnp.log1p(a / (x + i)), 0.0)
    return _lgamma_diff_stirling(x + steps, a) - shift


def log_ratio_add_empty(m, n, a):
    """log B(m a + n, a) − log B(m a, a): the change of the Dirichlet-multinomial marginal (23)/(24)
    when one more (empty) cell is activated next to ``m`` active cells holding ``n`` tokens.

    It is the likelihood part of eq. (29)-(30) (a = α, m = other active topics of the document) and of
    eq. (32)-(34) (a = β, m = other active words of the topic).  With ``n = 0`` it is 0; with
    ``m = 0`` and ``n > 0`` the state without the cell is impossible, so it is +∞ (a large number).
    """
    m = jnp.asarray(m, jnp.float32)
    n = jnp.asarray(n, jnp.float32)
    ms = jnp.maximum(m, 1.0)
    # = gammaln((ms+1)a) − gammaln((ms+1)a + n) − gammaln(ms a) + gammaln(ms a + n), as two
    # well-conditioned differences (see lgamma_diff)
    val = lgamma_diff(ms * a, a) - lgamma_diff(ms * a + n, a)
    return jnp.where(n == 0, 0.0, jnp.where(m == 0, BIG, val))


def ibp_mass(n_other, mass, conc, disc):
    """log of η Γ(1+δ) Γ(n+δ+σ) / (Γ(n+1+δ) Γ(δ+σ)) with n = ``n_other`` customers before: the mean
    number of new features of the next customer in the three-parameter IBP (sec. 2.1), used in
    eq. (30) (n = D − 1) and eq. (33) (n = K* − 1)."""
    n = jnp.asarray(n_other, jnp.float32)
    # Γ(n+δ+σ)/Γ(n+1+δ) as one well-conditioned difference (n = D − 1 is in the thousands)
    return (jnp.log(mass) + gammaln(1 + conc) - lgamma_diff(n + conc + disc, 1.0 - disc) - gammaln(conc + disc))


def ibp_sample(rng: np.random.Generator, n_customers: int, mass: float, conc: float, disc: float,
               min_features: int = 0) -> np.ndarray:
    """A draw of the three-parameter IBP (sec. 2.1; host numpy): customer d (0-based) takes an earlier
    dish k with probability (m_k − σ)/(d + δ) and Poisson(η Γ(1+δ) Γ(d+δ+σ) / (Γ(d+1+δ) Γ(δ+σ)))
    new dishes.  Returns the (n_customers x K*) binary matrix.  ``min_features``: a customer left
    with fewer dishes takes new ones up to that number (used so that every document of an initial
    state has a topic; it departs from the prior for those customers only)."""
    from scipy.special import gammaln as g

    if not (mass > 0 and disc >= 0 and disc < 1 and conc > -disc):
        raise ValueError(f"IBP parameters out of range: mass={mass}, conc={conc}, disc={disc}")
    counts = np.zeros(0, np.int64)
    rows = []
    for d in range(n_customers):
        old = rng.random(counts.size) < (counts - disc) / (d + conc)
        lam = mass * np.exp(g(1 + conc) + g(d + conc + disc) - g(d + 1 + conc) - g(conc + disc))
        n_new = max(int(rng.poisson(lam)), min_features - int(old.sum()))
        counts = np.concatenate([counts + old, np.ones(n_new, np.int64)])
        rows.append(np.concatenate([np.flatnonzero(old), np.arange(counts.size - n_new, counts.size)]))
    Z = np.zeros((n_customers, counts.size), bool)
    for d, r in enumerate(rows):
        Z[d, r] = True
    return Z


def topic_prior_logodds(c, n_other, eta, delta, sigma):
    """The prior part of the log odds of θ̄_kd = 1 (eq. 29-30): log (c − σ)/(n_other − c + δ + σ) of
    eq. (13) with K → ∞ for c ≥ 1 other documents using the topic, log λ (the IBP new-feature mass,
    :func:`ibp_mass`) for c = 0."""
    c = jnp.asarray(c, jnp.float32)
    old = jnp.log(jnp.maximum(c - sigma, TINY)) - jnp.log(jnp.maximum(n_other - c + delta + sigma, TINY))
    return jnp.where(c >= 1, old, ibp_mass(n_other, eta, delta, sigma))


def topic_activation_logodds(n_d, m, c, n_other, alpha, eta, delta, sigma):
    """Log odds of θ̄_kd = 1 for an entry with n_kd = 0 (eq. 28-30).

    ``n_d`` tokens of the document, ``m`` other active topics in it, ``c`` other documents where the
    topic is active, ``n_other`` = D − 1 other documents.  For c ≥ 1 this is eq. (29): likelihood
    ratio times the IBP prior odds (c − σ)/(n_other − c + δ + σ) of eq. (13) with K → ∞.  For c = 0
    (the topic is used by this document only) it is eq. (30): π̃ = λ r / (1 + λ r) with λ the
    IBP new-feature mass and r the likelihood ratio, i.e. log odds = log λ + log r.
    """
    return log_ratio_add_empty(m, n_d, alpha) + topic_prior_logodds(c, n_other, eta, delta, sigma)


def word_prior_logodds(c, k_star, gamma, xi, zeta, n_words, finite: bool):
    """The prior part of the log odds of φ̄_vk = 1 (eq. 32-34, see :func:`word_activation_logodds`)
    for a word active in c other live topics among ``k_star``."""
    c = jnp.asarray(c, jnp.float32)
    ks = jnp.asarray(k_star, jnp.float32)
    n_other = ks - 1.0
    if finite:
        a = gamma * xi / n_words
        lo_old = jnp.log(jnp.maximum(a + c - zeta, TINY)) - jnp.log(jnp.maximum(n_other - c + xi + zeta, TINY))
        eps = jnp.exp(log_ibp_intensity(ks, gamma, xi, zeta, n_max=None))
        p0 = jnp.clip(eps / n_words, 1e-12, 1 - 1e-6)
        lo_new = jnp.log(p0) - jnp.log1p(-p0)
    else:
        lo_old = jnp.log(jnp.maximum(c - zeta, TINY)) - jnp.log(jnp.maximum(n_other - c + xi + zeta, TINY))
        lo_new = ibp_mass(n_other, gamma, xi, zeta)
    return jnp.where(c >= 1, lo_old, lo_new)


def word_activation_logodds(n_k, m, c, k_star, beta, gamma, xi, zeta, n_words, finite: bool):
    """Log odds of φ̄_vk = 1 for an entry with n_vk = 0 (eq. 31-34).

    ``n_k`` tokens of the topic, ``m`` other active words of the topic, ``c`` other live topics in
    which the word is active, ``k_star`` live topics (customers of the word IBP).

    * infinite vocabulary, c ≥ 1: eq. (32), prior odds (c − ζ)/(K* − 1 − c + ξ + ζ);
    * infinite vocabulary, c = 0: eq. (33), log odds log λ + log r of a "new" word;
    * finite vocabulary (W words), c ≥ 1: eq. (34) written from the finite beta-Bernoulli
      conditional (13) with η δ / K → γ ξ / W: prior p = (γξ/W + c − ζ)/(γξ/W + K* − 1 + ξ).  (The
      printed eq. (34) also subtracts γξ/W in the odds' denominator, which does not follow from
      (13); the difference is O(γξ/W); ``test_finite_vocabulary_34_with_discount_against_beta_bernoulli``
      shows the printed form missing the beta-Bernoulli predictive.)
    * finite vocabulary, c = 0: eq. (14), prior p = ε / W with the intensity ε of eq. (10) over the
      K* topics (the expected number of distinct active words).
    """
    return log_ratio_add_empty(m, n_k, beta) + word_prior_logodds(c, k_star, gamma, xi, zeta, n_words, finite)


def ibp_harmonic(n_customers, conc, disc, n_max: int):
    """Σ_{j<n} Γ(1+δ)Γ(j+δ+σ)/(Γ(j+1+δ)Γ(δ+σ)) (eq. 10, 43) for a traced n ≤ n_max."""
    j = jnp.arange(n_max, dtype=jnp.float32)
    terms = jnp.exp(gammaln(1 + conc) + gammaln(j + conc + disc) - gammaln(j + 1 + conc) - gammaln(conc + disc))
    return jnp.sum(jnp.where(j < n_customers, terms, 0.0))


def log_ibp_intensity(n_customers, mass, conc, disc, n_max=None):
    """log ε of eq. (10): the expected number of features among ``n_customers`` customers.

    Closed form of the sum: Σ_{j<n} Γ(j+δ+σ)/Γ(j+1+δ) = [Γ(n+δ+σ)/Γ(n+δ) − Γ(δ+σ)/Γ(δ)]/σ for σ > 0
    (telescoping), and ψ(n+δ) − ψ(δ) for σ = 0; used where n is traced and unbounded.
    """
    n = jnp.asarray(n_customers, jnp.float32)
    if disc == 0:
        s = jax.scipy.special.digamma(n + conc) - jax.scipy.special.digamma(conc)
        return jnp.log(mass) + jnp.log(jnp.maximum(s * conc, TINY))  # Γ(1+δ)/Γ(δ) = δ
    a = jnp.exp(gammaln(n + conc + disc) - gammaln(n + conc)) - jnp.exp(gammaln(conc + disc) - gammaln(conc))
    log_s = jnp.log(jnp.maximum(a / disc, TINY)) + gammaln(1 + conc) - gammaln(conc + disc)
    return jnp.log(mass) + log_s


def ibp_log_likelihood(feature_counts, n_customers, mass, conc, disc, n_max: int | None = None):
    """log P(Θ̄ | η, δ, σ) of the three-parameter IBP, eq. (43), up to the combinatorial factor that
    does not depend on the parameters.  ``feature_counts``: customers per feature (features with 0
    are absent and ignored); ``n_customers``: D (or K* for the word matrix; may be traced, then
    ``n_max`` bounds it)."""
    c = jnp.asarray(feature_counts, jnp.float32)
    present = c > 0
    n = jnp.asarray(n_customers, jnp.float32)
    disc = jnp.asarray(disc, jnp.float32)  # a host float: float64 under JAX_ENABLE_X64
    k_star = jnp.sum(present)
    if n_max is None:
        n_max = int(n_customers)
    H = ibp_harmonic(n, conc, disc, n_max)
    per = (gammaln(1 + conc) + gammaln(jnp.maximum(n - c, 0.0) + conc + disc) + gammaln(jnp.maximum(c, 1.0) - disc)
           - gammaln(1 - disc) - gammaln(conc + disc) - gammaln(n + conc))
    return -mass * H + k_star * jnp.log(mass) + jnp.sum(jnp.where(present, per, 0.0))


def log_marginal_z(n_dk, theta_bar, alpha):
    """log p(z | Θ̄, α), eq. (23): Σ_d [log Γ(m_d α) − log Γ(m_d α + n_d)] + Σ_{n_kd>0} [log Γ(α + n_kd) − log Γ(α)]."""
    m = jnp.sum(theta_bar, axis=1).astype(jnp.float32)
    n_d = jnp.sum(n_dk, axis=1).astype(jnp.float32)
    ms = jnp.maximum(m, 1.0)
    t1 = jnp.where(n_d > 0, gammaln(ms * alpha) - gammaln(ms * alpha + n_d), 0.0)
    n = n_dk.astype(jnp.float32)
    t2 = jnp.where(n_dk > 0, gammaln(alpha + n) - gammaln(alpha), 0.0)
    return jnp.sum(t1) + jnp.sum(t2)


def log_marginal_w(n_wk, n_k, n_active_words, beta):
    """log p(w | z, Φ̄, β), eq. (24), over the topics: Σ_k [log Γ(M_k β) − log Γ(M_k β + n_k)] +
    Σ_{n_vk>0} [log Γ(β + n_vk) − log Γ(β)], ``n_active_words`` = M_k = φ̄_·k (W for LDA/FTM)."""
    M = jnp.maximum(jnp.asarray(n_active_words, jnp.float32), 1.0)
    nk = n_k.astype(jnp.float32)
    t1 = jnp.where(n_k > 0, gammaln(M * beta) - gammaln(M * beta + nk), 0.0)
    n = n_wk.astype(jnp.float32)
    t2 = jnp.where(n_wk > 0, gammaln(beta + n) - gammaln(beta), 0.0)
    return jnp.sum(t1) + jnp.sum(t2)

