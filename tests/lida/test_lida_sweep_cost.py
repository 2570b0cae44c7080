"""What a LIDA sweep does besides its token sweep (issue 41 item 6), checked against independent
references: the rising sums from tail counts and the α, β conditionals against eq. (23)-(24)
written out with ``math.lgamma``, the posterior sums against eq. (46)-(47) and the training
log-likelihood against a loop over the tokens; and a chain's cost in programs and waits: a
bounded number of compiled programs, none after the first sweeps, and one wait for the device
per LDA sweep."""

from __future__ import annotations

import math

import jax
import jax.monitoring
import numpy as np
import pytest

from topicjax.core.compiled import compiler_options
from topicjax.lida import chain, kernel
from topicjax.lida.evaluate import _loglik_blocks
from topicjax.lida.hyper import (_alpha_change, _beta_change, _log_rising, _rising_change, _tail, count_histogram,
                                  histograms)
from topicjax.lida.state import canonical, init_state, make_tokens

from .common import HYPER0, est

_PROGRAMS = [0]


def _count_programs(event, duration, **kw):
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":  # a new program (lowered once traced)
        _PROGRAMS[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_programs)


def _lgamma_rise(x: float, n: int) -> float:
    return math.lgamma(x + n) - math.lgamma(x)


def test_rising_sums_from_tail_counts_are_log_gamma_sums():
    """Σ_cells [ln Γ(a + n) − ln Γ(a)] − [the same at a0] from the tail counts of the cells'
    histogram, and ln Γ(x + n) − ln Γ(x) with large arguments, against ``math.lgamma``."""
    rng = np.random.default_rng(1)
    table = rng.integers(0, 12, (9, 5)) * (rng.random((9, 5)) < 0.6)
    a, a0 = 0.37, 1.3
    want = sum(_lgamma_rise(a, int(n)) - _lgamma_rise(a0, int(n)) for n in table.ravel() if n > 0)
    got = jax.jit(lambda t: _rising_change(_tail(count_histogram(t, 16)), a, a0))(table.astype(np.int32))
    assert float(got) == pytest.approx(want, rel=1e-5)
    xs = np.array([0.01, 2.5, 7.9, 8.0, 255.0, 4.3e4, 1.3e5], np.float32)
    for n in (0, 1, 3, 140, 9000):
        got = np.asarray(jax.jit(_log_rising)(xs, np.float32(n)))
        want = [_lgamma_rise(float(x), n) for x in xs]
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-6)


def _eq23(n_dk, theta_bar, a) -> float:
    """ln p(z | Θ̄, a), eq. (23), document by document."""
    total = 0.0
    for d in range(n_dk.shape[0]):
        m, n_d = int(theta_bar[d].sum()), int(n_dk[d].sum())
        if n_d:
            total += math.lgamma(max(m, 1) * a) - math.lgamma(max(m, 1) * a + n_d)
        total += sum(_lgamma_rise(a, int(n)) for n in n_dk[d] if n > 0)
    return total


def _eq24(n_wk, phi_bar, live, W: int, sparse: bool, b) -> float:
    """ln p(w | z, Φ̄, b), eq. (24), over the live topics, topic by topic."""
    total = 0.0
    for k in range(n_wk.shape[1]):
        n_k = int(n_wk[:, k].sum())
        if not live[k] or n_k == 0:
            continue
        M = int(phi_bar[:, k].sum()) if sparse else W
        total += math.lgamma(M * b) - math.lgamma(M * b + n_k)
        total += sum(_lgamma_rise(b, int(n)) for n in n_wk[:, k] if n > 0)
    return total


@pytest.mark.parametrize("variant", ["lda", "lida"])
def test_alpha_and_beta_conditionals_are_eq_23_and_24(small, variant):
    """The functions the slice sampler reads, a ↦ ln p(z | Θ̄, a) − ln p(z | Θ̄, α) and
    b ↦ ln p(w | z, Φ̄, b) − ln p(w | z, Φ̄, β), from the count histograms, against eq. (23)-(24)
    written out: LDA (every slot in every document: the documents' lengths as tail counts) and
    LIDA (Θ̄ with inactive slots, Φ̄ with words active beyond those holding tokens)."""
    corpus, _ = small
    tokens = make_tokens(corpus)
    cfg = canonical(est(variant)._config(corpus, 8, corpus.n_words))
    st = init_state(jax.random.key(2), tokens, cfg, HYPER0, 6)
    rng = np.random.default_rng(3)
    if variant == "lida":
        st = st._replace(theta_bar=st.theta_bar | (rng.random(st.theta_bar.shape) < 0.2),
                         phi_bar=st.phi_bar | (rng.random(st.phi_bar.shape) < 0.3))
    tb, pb = np.asarray(st.theta_bar), np.asarray(st.phi_bar)
    n_dk, n_wk = np.asarray(st.n_dk), np.asarray(st.n_wk)
    live = tb.any(0)

    @jax.jit
    def changes(st, n_d, a, b):
        h_dk, h_wk = histograms(st, cfg, None)
        lv = st.theta_bar.any(0) if cfg.focused else np.ones(cfg.n_topics, bool)
        return _alpha_change(st, cfg, h_dk, n_d)(a), _beta_change(st, cfg, lv, h_wk)(b)

    a0, b0 = HYPER0["alpha"], HYPER0["beta"]
    for a, b in ((0.05, 0.9), (1.7, 0.01)):
        da, db = changes(st, tokens.n_d, np.float32(a), np.float32(b))
        want_a = _eq23(n_dk, tb, a) - _eq23(n_dk, tb, a0)
        want_b = _eq24(n_wk, pb, live, corpus.n_words, cfg.sparse, b) - _eq24(n_wk, pb, live, corpus.n_words,
                                                                              cfg.sparse, b0)
        assert float(da) == pytest.approx(want_a, rel=1e-5, abs=1e-3)
        assert float(db) == pytest.approx(want_b, rel=1e-5, abs=1e-3)


def test_posterior_sums_and_training_likelihood_are_eq_46_47(small):
    """The chain's post-sweep program's posterior sums after two samples are twice φ (47) =
    (β + n_vk)/(W β + n_k) and θ (46) = (α + n_kd)/(K α + n_d), nothing before ``burn_in``, and
    its record's training log-likelihood is Σ_i ln Σ_k φ_{w_i k} θ_{d_i k}, both in float64 numpy
    from the counts."""
    corpus, _ = small
    # K = 7 and the token stream of a fit: the post-sweep program of the fits below
    cfg = est("lda")._config(corpus, 7, corpus.n_words)
    tokens = make_tokens(corpus, block_tokens=64, extras=False, lanes_layout=not kernel.use_kernel(cfg))
    st = init_state(jax.random.key(4), tokens, cfg, HYPER0, 7)
    a, b, K, W = HYPER0["alpha"], HYPER0["beta"], 7, corpus.n_words
    n_dk, n_wk = np.asarray(st.n_dk, np.float64), np.asarray(st.n_wk, np.float64)
    phi = (b + n_wk) / (W * b + n_wk.sum(0))
    theta = (a + n_dk) / (K * a + n_dk.sum(1, keepdims=True))
    avg = chain.zero_sums(cfg)
    n_ll = _loglik_blocks(corpus.n_tokens)
    for i, acc in enumerate((False, True, True)):  # a sweep before burn_in, then two samples
        st, avg, rec = chain._post(st, avg, jax.random.key(5), i, tokens, cfg, hyper=False, accumulate=acc,
                                   evaluate=i == 2, loglik=True)
    np.testing.assert_allclose(np.asarray(avg.phi_sum), 2 * phi, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(avg.theta_sum), 2 * theta, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(avg.n), [2] * K)
    doc, word = np.asarray(tokens.doc), np.asarray(tokens.word)
    want = sum(math.log(float(phi[w] @ theta[d])) for d, w in zip(doc, word))
    hypers, _, live, ll = chain._read(np.asarray(rec), n_ll)
    assert ll == pytest.approx(want, rel=1e-6)
    assert hypers["alpha"] == pytest.approx(a) and hypers["beta"] == pytest.approx(b) and live == K


def test_a_sweep_compiles_few_programs_and_waits_for_the_device_once(small, monkeypatch):
    """An LDA chain's steps compile two programs, both in its first sweep: the token sweep (its
    key folded from the chain's key and the sweep index inside) and the post-sweep program
    (hyperparameters, objective, live topics, posterior sums, training likelihood; whether a
    sweep samples the hyperparameters, accumulates or evaluates is a traced switch, so the sweeps
    before and after ``hyper_start`` and ``burn_in`` and the evaluated ones share it); the whole
    fit adds one, its initial state's (the fit's keys, the initial assignment, its counts and
    masks).  A refit
    with another seed, hyperparameter values, sweep count, ``hyper_start``, ``burn_in`` and
    ``eval_every`` compiles nothing at all, its initial state's program included.  Each sweep
    copies one array from the device (its record), counted at ``jax.Array._value``, which
    ``jax.device_get``, ``float()`` and ``int()`` of an array read (the old step read ten values
    one by one: the six hyperparameters, the objective, the live topics, the two overflows)."""
    corpus, _ = small
    from jax._src import array as jax_array  # the property every device-to-host copy reads

    copies = [0]
    value = jax_array.ArrayImpl._value

    def counted(self):
        copies[0] += 1
        return value.fget(self)

    monkeypatch.setattr(jax_array.ArrayImpl, "_value", property(counted))
    per_step = []
    step = chain.ALGORITHM.step

    def spy(c, iteration, args, static):
        p0, c0 = _PROGRAMS[0], copies[0]
        out = step(c, iteration, args, static)
        per_step.append((_PROGRAMS[0] - p0, copies[0] - c0))
        return out

    monkeypatch.setattr(chain, "ALGORITHM", chain.ALGORITHM._replace(step=spy))
    kw = dict(n_components=7, eval_every=3)
    compiler_options()  # the backend's one-time trial compilation is not the fit's
    p0 = _PROGRAMS[0]
    est("lda", max_iter=8, hyper_start=2, burn_in=4, **kw).fit(corpus)
    # the whole fit: those two and its initial state's program (keys, assignments, counts, masks)
    assert _PROGRAMS[0] - p0 <= 3, per_step
    programs, waits = zip(*per_step)
    # two (fewer where another test of this process compiled the same shapes)
    assert programs[0] <= 2 and programs[1:] == (0,) * 7, per_step
    assert max(waits) == 1, per_step
    per_step.clear()
    p0 = _PROGRAMS[0]
    est("lda", max_iter=6, random_state=5, hyper_start=1, burn_in=2, alpha=0.7, beta=0.05, **kw).fit(corpus)
    assert _PROGRAMS[0] == p0, "a refit that changes only traced values compiles nothing"
    assert [p for p, _ in per_step] == [0] * 6 and max(w for _, w in per_step) == 1, per_step


def test_the_program_counting_experiment_runs(capsys):
    """``experiments/count_lida_programs.py`` (the per-program compile bill of a fit, issue 42)
    at smoke size: it fits and prints its three kinds of compile events and the fit's line."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "count_lida_programs.py"
    spec = importlib.util.spec_from_file_location("count_lida_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["lda", "3", "4", "--bars"])
    out = capsys.readouterr().out
    assert "LIDA(4, variant='lda'), 3 sweeps" in out
    for kind in ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration", "backend_compile_duration"):
        assert f"  {kind}: " in out
