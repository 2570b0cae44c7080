"""Sizes of a LIDA fit bounded by its corpus, and its memory check against what a fit allocates.

* K_max (``n_components``) of LIDA/FTM is at most the corpus's tokens (a live topic holds a token),
  refused before anything is allocated; LDA/SSTM keep the corpus's topics check, also first.
* ``validators.memory_needed`` against XLA's own counts of the compiled programs of a fit
  (``memory_analysis``: arguments held between sweeps, outputs and temporaries of each program),
  and against the peak resident memory of a real fit (Linux, a subprocess).
* The memory check runs again before K_max grows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest
from forked_peaks import measured_env

import topicjax as tj
from topicjax.lida import LIDA, chain, evaluate, kernel, sampler
from topicjax.lida.state import HYPER, canonical, init_state, make_tokens
from topicjax.lida.validators import loglik_arrays, memory_needed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _corpus(D, L, W, seed=0):
    """D documents of about L tokens over W words (Poisson counts)."""
    rng = np.random.default_rng(seed)
    return tj.Corpus.from_dense(rng.poisson(L / W, size=(D, W)), vocab=[f"w{i}" for i in range(W)])


# ------------------------------------------------------------------------------ bounds from the data
@pytest.mark.parametrize("variant", ["lida", "ftm"])
def test_slots_beyond_the_tokens_are_refused_at_once(variant, monkeypatch):
    """Issue 26: n_components=10**7 on a 40-document corpus ran for minutes (1e5 slots: 43 s for 2
    sweeps).  Now the bound is the tokens, checked before the memory check and any allocation."""
    corpus = _corpus(40, 25, 50)
    n_tokens = int(np.sum(corpus.counts))
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", "1")  # the bound comes first
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as e:
        LIDA(variant=variant, n_components=10**7, progress=False).fit(corpus)
    assert str(e.value) == (f"n_components must be an integer <= {n_tokens} (the corpus's tokens: every live topic "
                            f"holds at least one token), got 10000000")
    assert time.perf_counter() - t0 < 2
    with pytest.raises(ValueError, match=rf"^n_components must be an integer <= {n_tokens} .*got {n_tokens + 1}$"):
        LIDA(variant=variant, n_components=n_tokens + 1, progress=False).fit(corpus)


def test_slots_up_to_the_tokens_fit():
    corpus = tj.Corpus.from_dense(np.array([[1, 2, 0], [0, 1, 3]]), vocab=["a", "b", "c"])  # 7 tokens
    model = LIDA(variant="ftm", n_components=7, max_iter=2, eval_every=0, progress=False).fit(corpus)
    assert model.n_components_ >= 7 and model.phi_.shape[0] == 3 and 1 <= model.n_topics_ <= model.phi_.shape[1]


@pytest.mark.parametrize("variant", ["lda", "sstm"])
def test_topics_beyond_the_tokens_are_refused_before_the_memory_check(variant, monkeypatch):
    corpus = _corpus(40, 25, 50)
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", "1")
    with pytest.raises(ValueError, match=rf"^10000000 topics is more than the {int(np.sum(corpus.counts))} tokens"):
        LIDA(variant=variant, n_components=10**7, progress=False).fit(corpus)


def test_memory_check_names_the_largest_part(monkeypatch):
    corpus = _corpus(30, 20, 40)
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", "1M")
    # 400 slots: the training log-likelihood's (block x K_max) products, one block of the corpus's
    # 622 tokens x 401 slots of float32 (one such array, three with jaxlib's default options), 64
    # bytes per token and the means it reads, (30 + 40) x 400 cells of 5 bytes, are the largest part
    assert corpus.n_tokens == 622
    products = ((4 * loglik_arrays() * 401 + 64) * 622 + 5 * 70 * 400) / (1 << 20)
    with pytest.raises(ValueError, match=r"limit of 1\.0 MiB .*the largest part: the log-likelihood products, "
                                         rf"{products:.1f} MiB\); .*set eval_every=0 to skip them"):
        LIDA(variant="lida", n_components=400, progress=False).fit(corpus)
    wide = _corpus(30, 20, 400)  # (documents + words) x K_max cells dominate
    with pytest.raises(ValueError, match=r"the largest part: the (count tables|sweep|posterior sums)[^;]*; .*lower "
                                         r"n_components"):
        LIDA(variant="lida", n_components=400, eval_every=0, progress=False).fit(wide)


def test_memory_is_checked_again_before_k_max_grows(small, monkeypatch):
    """Births that find no free slot double K_max; that growth is checked like the start."""
    corpus, _ = small
    need = memory_needed(corpus.n_tokens, corpus.n_docs, corpus.n_words, 2, loglik=False)
    monkeypatch.setenv("TOPICJAX_LIDA_MEMORY", str(need))  # room for K_max = 2, not more
    model = LIDA(2, variant="ftm", init_topics=2, eta=50.0, max_iter=3, hyper_start=100, eval_every=0, progress=False)
    with pytest.raises(ValueError, match=r"^sweep 0: \d+ new topic\(s\) found no free slot among K_max=2, and growing: "
                                         r"LIDA on this corpus .*K_max=\d+\) needs about"):
        model.fit(corpus)


# ------------------------------------------------------------------------------ memory against XLA
def _cost(compiled):
    m = compiled.memory_analysis()
    return m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes


def _xla_peak(corpus, model):
    """The peak bytes of a fit by XLA's accounting: every array the fit holds between programs (token
    stream, state, posterior sums and means, log-likelihood entries) plus the largest program's
    outputs and temporaries (the XLA "parallel" path of LIDA/FTM: the masks' outputs stay while the
    token step runs); ``None`` for the log-likelihood when ``eval_every=0``."""
    model._validate_params()
    K, W = model.n_components, corpus.n_words
    cfg = model._config(corpus, K, W)
    lanes = not kernel.use_kernel(cfg)  # as the fit makes its token stream
    tokens = make_tokens(corpus, block_tokens=model._block_tokens(corpus.n_tokens), extras=cfg.mode == "stale",
                         lanes_layout=lanes)
    state = init_state(jax.random.key(0), tokens, cfg, {h: getattr(model, h) for h in HYPER},
                       min(K, 20) if cfg.focused else K)
    key = jax.random.key(1)
    ncfg = sampler._normalised(cfg)
    backend = kernel.sweep_backend(ncfg)
    phi, theta, live = evaluate.sample_means(state, cfg)
    avg = evaluate.accumulate(None, state, cfg)
    held = sum(a.nbytes for a in jax.tree_util.tree_leaves((tokens, state, avg, phi, theta, live)))
    costs = []
    if cfg.mode != "parallel" or not cfg.focused or backend != "xla":
        costs.append(_cost(sampler._sweep_jit.lower(state, key, tokens, ncfg, 0, backend).compile()))
    else:
        m = sampler._masks_jit.lower(state, key, tokens, ncfg).compile().memory_analysis()
        assign = sampler._assign_jit.lower(state, key, tokens, ncfg, min(K, 64), "xla").compile()
        costs.append(m.output_size_in_bytes + max(m.temp_size_in_bytes, _cost(assign)))
    # what a fit's chain step runs after the sweep (topicjax.lida.chain.step): one program, the
    # post-sweep one (count histograms, hyperparameters, objective, the sample's means, the
    # in-place posterior sums and, in a fit that evaluates, the training likelihood)
    post = lambda ll: _cost(chain._post_jit.lower(state, avg, key, np.zeros(4, np.int32), tokens, canonical(cfg),
                                                  ll).compile())
    costs.append(post(False))
    loglik = max(post(True), _cost(evaluate.loglik_tokens.lower(phi, theta, tokens.doc, tokens.word).compile()))
    return held + max(costs), held + max(costs + [loglik]), lanes


@pytest.mark.parametrize("variant, mode, K", [
    ("lida", "parallel", 512),
    pytest.param("lda", "parallel", 512, marks=pytest.mark.slow),
    pytest.param("ftm", "stale", 256, marks=pytest.mark.slow),
    pytest.param("sstm", "exact", 256, marks=pytest.mark.slow),
])
def test_memory_needed_covers_what_xla_allocates(variant, mode, K):
    """memory_needed is at least XLA's count of the fit's arrays and at most 1.6 times it, with and
    without the training log-likelihood (whose products are one (block x K) float32 array in the
    programs compiled with topicjax's options, as XLA counts and the estimate says; with jaxlib's
    defaults XLA counts two and resident memory grows by three, which the estimate then counts)."""
    corpus = _corpus(40, 100, 200)
    model = LIDA(variant=variant, n_components=K, sampler=mode, progress=False)
    without, with_ll, lanes = _xla_peak(corpus, model)
    sizes = (corpus.n_tokens, corpus.n_docs, corpus.n_words, K)
    for measured, loglik in ((without, False), (with_ll, True)):
        need = memory_needed(*sizes, mode=mode, loglik=loglik, lanes_layout=lanes,
                             extras=mode == "stale")
        assert measured <= need <= 1.6 * measured, (loglik, measured, need)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="peak resident memory reset needs Linux")
def test_memory_needed_covers_the_peak_resident_memory_of_a_fit():
    """A real fit in a fresh process: a fit of two sweeps after a fit of one sweep that compiled its
    programs (it compiles none itself, checked), its peak resident memory (VmHWM after resetting it)
    above the resident memory before it.  Here the training log-likelihood's products dominate (1
    block of the ~45,000 tokens x 257 slots).  Compiled with XLA's default fusions and buffer
    planning, LLVM at -O0 (tests/forked_peaks.py: ``measured_env``; 25 s of CPU against 42 s at
    XLA's defaults, 2026-11-28)."""
    code = textwrap.dedent("""
        import gc, json, jax, numpy as np, topicjax as tj
        from topicjax.lida import evaluate, validators
        from topicjax.lida.validators import loglik_arrays, memory_needed
        # blocks of 65,536 tokens (the library's are 8,192, to stay in cache): the products of one
        # block then dominate the fit's transient memory, and the test sees them in VmHWM
        BLOCK = evaluate.BLOCK = validators.BLOCK = 1 << 16
        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        rng = np.random.default_rng(0)
        D, L, W, K = 150, 300, 3000, 256
        c = tj.Corpus.from_dense(rng.poisson(L / W, size=(D, W)), vocab=[f"w{i}" for i in range(W)])
        fit = lambda n: tj.LIDA(K, variant="lida", max_iter=n, burn_in=0, eval_every=1, progress=False).fit(c)
        fit(1)  # compiles every program of the fit (the post-sweep one evaluates at every sweep)
        compiled = []
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, secs, **kw: compiled.append(event) if event == "/jax/core/compile/backend_compile_duration"
            else None)
        gc.collect()
        base = status("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        fit(2)
        products = 4 * loglik_arrays() * min(c.n_tokens, BLOCK) * (K + 1)
        print(json.dumps([status("VmHWM") - base, memory_needed(c.n_tokens, D, W, K, lanes_layout=False, extras=False),
                          products, len(compiled)]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=measured_env(JAX_PLATFORMS="cpu"), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    grew, need, products, compiled = json.loads(out.stdout.strip().splitlines()[-1])
    # the measured fit ran programs compiled before it: its peak is the fit's, not XLA's compiler's
    assert compiled == 0, f"the measured fit compiled {compiled} program(s)"
    assert grew > 0.8 * products  # the products were allocated (one array of 46 MB, three with jaxlib's defaults)
    # resident memory also holds the allocator's rounding and the runtime's small buffers, which
    # the estimate (arrays only) does not count.  With jaxlib's default CPU compiler options the
    # products took three arrays (~150 MB here) and six runs grew by 0.90-1.11x the estimate
    # (2026-11-26); compiled with topicjax's options (topicjax.core.compiled) they take one
    # (46 MB), and twelve runs (2026-11-27, one arena) grew by the estimate's 64.2 MB minus 12 MB
    # to plus 11 MB: an allowance of 15 % plus 24 MB for the runtime's buffers.
    assert grew <= 1.15 * need + (24 << 20) and need <= 1.5 * grew, (grew, need)
