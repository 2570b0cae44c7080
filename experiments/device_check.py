"""The prepared device check (issues 30 and 41): what a session does first when it is lent a GPU.

One command, under 5 minutes on a GPU machine including compilation (``--budget`` 280 s):

1. **Checks** (GPU against the host CPU, in one process): the same computation is run with the
   accelerator as JAX's default device and under ``jax.default_device(cpu)`` (the host's XLA:CPU;
   the compiled C++ kernels are CPU-only and not built there), starting from the same arrays, and
   the results are compared to float32 tolerance: the E-step (ARTM eq. 4, 7-8) and one M-step
   (eq. 14-16), a PLSA fit and an ARTM fit with a plain-Python regularizer through the driver,
   ``ARTM.fit_many`` (vmapped models), one LIDA-family sweep (LDA and LIDA: a sampler, so the check
   is that almost every token draws the same topic and the count tables are consistent), one PTM
   GEM iteration (BIC and switches), a TTMM EM fit, and a hypergradient of the tuner
   (d validation objective / d log τ).
2. **Timings** (warm-up and compilation excluded, medians): the PLSA EM pass on KOS and 20
   Newsgroups at T = 50/100/200; a pass on a generated corpus of NYTimes' size
   (:mod:`topicjax.data.synthetic`, ~300k documents, ~70 M non-zeros) at T = 100 when it fits the
   device; a 32-model ARTM grid through ``fit_many`` against 32 sequential fits (end to end); the
   LDA sweep in tokens/s on KOS at K = 100 against tomotopy's 2-worker CPU figure of
   ``bench_lda_tomotopy.md``; one PTM GEM iteration on 20 Newsgroups (M = 100); one tuner step.
   The PLSA pass is timed per call and inside one compiled loop of passes (what a fit runs).
   Every timing is reported beside its roofline limit and their ratio (:mod:`roofline`: the
   least time the bytes and flops of the work take on this device's peak figures; for the PTM
   iteration and the tuner step a lower bound from the passes they contain).
3. **A/B of the E-step** (issue 41): the KOS pass at T = 100 timed in separate child processes
   for ``TOPICJAX_ESTEP=xla`` (the per-piece E-step) and ``TOPICJAX_ESTEP=xla_scatter`` (the
   per-slot scatter path), each without and with XLA's flush-to-zero flag (:data:`FTZ_FLAG`); a
   child that fails (an unknown ``TOPICJAX_ESTEP`` value, say) is reported with its error.
4. **Profile** (``jax.profiler`` trace of a few PLSA passes and LDA sweeps, summarised as the
   device's busiest kernels) so that a missed target says where the time goes.

Results go to ``experiments/results/gpu_<date>_<device>.md`` (device, jax version, every figure,
the command, the targets of issue 30) and a JSON beside it; the report is rewritten after every
section, so a run cut short keeps what it measured.  A section that fails is reported with its
error and the rest still run; the exit status is 1 when a check failed.  ``--budget`` seconds
(default 280) bound the whole run: sections that would start after it are skipped and listed, and
the A/B children are given only the time left.  ``--roofline-device`` names the device whose
figures the limits use (default: the one JAX reports; a device not in the table, the CPU of a dry
run say, gets the H100's figures, and the report says so).

Corpora: the shared data (``$TOPICJAX_DATA`` or ``../shared/data``) when present; otherwise
generated corpora of the same sizes stand in, and the report says so.

``--dry-run`` runs the same code on the CPU with tiny sizes in seconds (a CI test runs it).

On a GPU machine (the device tool; the tree travels, ``../shared`` does not)::

    mkdir -p .devdata && cp -r ../shared/data/kos ../shared/data/20newsgroups .devdata/   # once, here
    # run there, carrying .devdata:
    TOPICJAX_DATA=.devdata python3 experiments/device_check.py --out-dir $OUT

    python experiments/device_check.py --dry-run          # anywhere, seconds
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "experiments")):
    if p not in sys.path:
        sys.path.insert(0, p)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import roofline as RL  # noqa: E402
import topicjax as tj  # noqa: E402
from topicjax.data import synthetic  # noqa: E402

#: issue 41's targets (an H100; an H200 counts like one; the report names the device it ran on)
TARGETS = {
    "kos_t100_loop_ms": 0.15,
    "nytimes_pass_s": 0.015,
    "lda_exact_mtok": 300.0,
    "grid_speedup": 10.0,
    "max_roofline_ratio": 3.0,
}
#: XLA's flush-to-zero flag for the code it generates for GPUs (``DebugOptions.xla_gpu_ftz``;
#: default false).  The name is confirmed: it is in the flag table of the installed jaxlib, whose
#: parser rejects unknown ``XLA_FLAGS`` entries.  XLA has no separate flag for its atomics: its
#: float scatter-add emits ``atomicrmw fadd`` (PTX ``red/atom.add.f32``, which flushes subnormals
#: by itself), so what this flag changes around the scatter-adds is the arithmetic that feeds them.
FTZ_FLAG = "--xla_gpu_ftz=true"
#: TOPICJAX_ESTEP values compared by the A/B section: the new per-piece E-step and the old
#: per-slot scatter path.
AB_ESTEPS = ("xla", "xla_scatter")
#: The line a child of the A/B section prints its result on (JSON after it).
AB_MARK = "AB-RESULT "
#: tomotopy LDAModel, 2 workers, KOS K = 100, M tokens/s (experiments/results/bench_lda_tomotopy.md)
TOMOTOPY_2W_MTOK = 20.97


# ------------------------------------------------------------------------------------ setup
class Sizes:
    """Problem sizes of a full run and of ``--dry-run``."""

    def __init__(self, dry: bool):
        self.dry = dry
        self.check_topics = 6
        # dry: one T, the E-step check's (4 x check_topics), whose step program the pass then reuses
        self.topics = [4 * self.check_topics] if dry else [50, 100, 200]  # each T compiles a pass
        self.rounds = 3 if dry else 20
        self.nytimes = dict(n_docs=400, n_words=300, mean_length=30.0) if dry else \
            dict(synthetic.PRESETS["nytimes"])
        self.grid_models = 4 if dry else 32
        self.grid_topics = 6 if dry else 100
        # dry: the settings of check_fits' fit_many (4 models, T = check_topics, 8 iterations), whose
        # compiled program the grid then reuses
        self.grid_iters = 8 if dry else 20
        self.lda_k = 8 if dry else 100
        self.lda_sweeps = 2 if dry else 10
        self.ptm_m = 6 if dry else 100
        # the profile's PLSA T (dry: the passes' T, whose step program it reuses)
        self.profile_topics = self.topics[0] if dry else 100
        self.tune_topics = 5 if dry else 50
        self.tune_iters = 3 if dry else 20
        self.loop_passes = 3 if dry else 20  # passes per compiled loop
        self.ab_topics = 4 if dry else 100
        # (E-step, FTZ flag) of the A/B children; the dry run takes the diagonal (two processes)
        pairs = [(e, f) for e in AB_ESTEPS for f in (False, True)]
        self.ab_pairs = [pairs[0], pairs[-1]] if dry else pairs


def load_corpora(sizes: Sizes, notes: list, names=("kos", "20ng")):
    """``{"kos": Corpus, "20ng": Corpus}`` (those of ``names``): the shared data, or generated
    stand-ins of the same size."""
    out = {}
    stand_in = {"kos": dict(n_docs=3430, n_words=6906, mean_length=136.6),
                "20ng": dict(n_docs=11314, n_words=22000, mean_length=116.0)}
    for name in names:
        if sizes.dry:
            gen = synthetic.LDAGenerator(n_docs=120, n_words=200, mean_length=40, n_topics=5, seed=1)
            out[name] = corpus_from_generator(gen, 120)
            continue
        try:
            out[name] = tj.datasets.load_kos() if name == "kos" else tj.datasets.load_20newsgroups("train")
        except FileNotFoundError as e:
            gen = synthetic.LDAGenerator(**stand_in[name], n_topics=50, seed=1)
            out[name] = corpus_from_generator(gen, 5000)
            notes.append(f"{name}: shared data absent ({e}); a generated corpus of its size stands in")
    return out


def corpus_from_generator(gen, chunk_docs: int):
    """A :class:`Corpus` of all documents of a :class:`~topicjax.data.synthetic.LDAGenerator`."""
    chunks = list(gen.chunks(chunk_docs))
    doc_ids = np.concatenate([np.repeat(np.arange(c.first, c.first + len(c.lengths)), np.diff(c.offsets))
                              for c in chunks])
    word_ids = np.concatenate([c.word_ids for c in chunks])
    counts = np.concatenate([c.counts for c in chunks])
    return tj.Corpus.from_entries(doc_ids, word_ids, counts, n_docs=gen.n_docs, n_words=gen.n_words,
                                  empty_docs="drop")


def cpu_device():
    return jax.devices("cpu")[0]


def on(device, fn, *args):
    """``fn(*args)`` with ``device`` as JAX's default device, the arguments copied there first;
    the outputs come back as numpy arrays (pytrees of them)."""
    with jax.default_device(device):
        args = jax.device_put(args, device)
        out = fn(*args)
        return jax.tree.map(lambda a: np.asarray(a) if isinstance(a, (jax.Array, np.ndarray)) else a, out)


def rel_diff(a, b) -> float:
    """max |a - b| / max |b| over all leaves (0 for equal, exact-zero references)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    if len(la) != len(lb):
        raise AssertionError(f"{len(la)} leaves against {len(lb)}")
    worst = 0.0
    for x, y in zip(la, lb):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            raise AssertionError(f"shape {x.shape} against {y.shape}")
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        d = float(np.max(np.abs(x - y))) if y.size else 0.0
        worst = max(worst, d / scale if scale > 0 else d)
    return worst


def median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def loop_pass_time(state, data, n: int, rounds: int) -> float:
    """Seconds per PLSA pass inside one compiled program of ``n`` passes (a ``fori_loop`` over
    ``em.make_step``'s step, what a fit's compiled loop runs), median of ``rounds`` programs after
    a warm-up call; no host round trip between the passes."""
    from topicjax.artm import algorithm as em
    from topicjax.core import compiled

    one = em.make_step(jit=False)
    loop = compiled.jit(lambda s, d: jax.lax.fori_loop(0, n, lambda _, x: one(x, d), s))
    box = [jax.block_until_ready(loop(state, data))]

    def call():
        box[0] = loop(box[0], data)
        return box[0].phi

    return median_time(call, rounds) / n


def with_limit(row: dict, cost, seconds: float, key: str = "") -> dict:
    """``row`` with the roofline limit of ``cost`` and the ratio of ``seconds`` to it, under
    ``limit_ms`` / ``ratio`` (prefixed with ``key``), and the model's bytes and flops."""
    row[f"{key}limit_ms"] = cost.limit_s * 1e3
    row[f"{key}ratio"] = seconds / cost.limit_s
    row.setdefault("roofline", cost.record())
    return row


# ------------------------------------------------------------------------------------ checks
def check_estep_mstep(ctx):
    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    corpus = ctx.corpora["kos"]
    T = ctx.sizes.check_topics * 4
    data = layout.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
    step = em.make_step()

    def estep(phi, theta, data):
        from topicjax.core import estep as E

        return E.expected_counts(phi, theta, data)

    def one_step(state, data):
        return step(step(state, data), data)

    gpu = on(ctx.device, estep, state.phi, state.theta, data)
    cpu = on(cpu_device(), estep, state.phi, state.theta, data)
    rows = [("E-step: L, ∂L/∂Φ, ∂L/∂Θ (KOS)", rel_diff(gpu, cpu), 1e-4)]
    gpu = on(ctx.device, one_step, state, data)
    cpu = on(cpu_device(), one_step, state, data)
    rows.append(("two EM steps (E-step + M-step): Φ, Θ", rel_diff((gpu.phi, gpu.theta), (cpu.phi, cpu.theta)), 1e-4))
    return rows


def check_fits(ctx):
    from topicjax import regularizers as R

    corpus = ctx.corpora["kos"]
    T = ctx.sizes.check_topics
    rows = []

    def plsa(_):
        m = tj.PLSA(T, max_iter=10, random_state=0, progress=False).fit(corpus)
        return m.phi_, m.theta_

    g, c = on(ctx.device, plsa, 0), on(cpu_device(), plsa, 0)
    rows.append(("PLSA fit, 10 iterations (driver): Φ, Θ", rel_diff(g, c), 1e-3))

    def plain(phi, theta):  # a plain Python regularizer (ARTM eq. 10: its term from jax.grad)
        return 0.05 * jnp.sum(jnp.log(phi + 1e-3))

    def artm(_):
        m = tj.ARTM(T, regularizers=[plain, (R.sparse_theta(), 0.05)], max_iter=10, random_state=0,
                    progress=False, scores=()).fit(corpus)
        return m.phi_, m.theta_

    g, c = on(ctx.device, artm, 0), on(cpu_device(), artm, 0)
    rows.append(("ARTM fit with a plain R(Φ, Θ) and Θ sparsing: Φ, Θ", rel_diff(g, c), 1e-3))

    def many(_):
        base = tj.ARTM(T, regularizers=[(R.smooth_phi(), 0.0), (R.sparse_theta(), 0.0)], max_iter=8,
                       random_state=0, progress=False, scores=())
        taus = np.array([[0.0, 0.0], [0.1, 0.01], [0.5, 0.05], [1.0, 0.1]])
        return [m.phi_ for m in base.fit_many(corpus, taus=taus, mode="vmap", vmap_size=4)]

    g, c = on(ctx.device, many, 0), on(cpu_device(), many, 0)
    rows.append(("ARTM.fit_many, 4 models vmapped: Φ of each", rel_diff(g, c), 1e-3))

    def ttmm(_):
        m = tj.TTMM(T, n_themes=3, max_iter=10, random_state=0, progress=False).fit(corpus)
        return tuple(np.asarray(x) for x in (m.pi_, m.tau_, m.beta_))

    g, c = on(ctx.device, ttmm, 0), on(cpu_device(), ttmm, 0)
    rows.append(("TTMM EM fit, 10 iterations: π, τ, β", rel_diff(g, c), 1e-3))
    return rows


def check_lida(ctx):
    from topicjax.lida import sampler as lida_sampler, state as lida_state

    corpus = ctx.corpora["kos"]
    K = ctx.sizes.check_topics * 4
    rows = []
    for variant in ("lda", "lida"):
        tokens = lida_state.make_tokens(corpus)
        cfg = lida_state.Config(variant=variant, n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                       n_rows=corpus.n_words, n_tokens=int(corpus.n_tokens), sample=())
        hyper = dict(alpha=0.1, beta=0.01, eta=5.0, delta=1.0, gamma=50.0, xi=1.0)
        state = lida_state.init_state(jax.random.key(0), tokens, cfg, hyper, K)

        def sweep(state, tokens):
            return lida_sampler.sweep(state, jax.random.key(1), tokens, cfg)

        g = on(ctx.device, sweep, state, tokens)
        c = on(cpu_device(), sweep, state, tokens)
        differ = float(np.mean(g.z != c.z))
        # the counts must be the tables of the sampled z on each device
        for s in (g, c):
            n_k = np.bincount(s.z, minlength=K)
            if not np.array_equal(n_k, s.n_k) or not np.array_equal(np.asarray(s.n_wk).sum(0), n_k):
                raise AssertionError(f"{variant}: count tables inconsistent with z")
        rows.append((f"LIDA-family sweep, variant {variant!r} (KOS, K = {K}): share of tokens with another topic",
                     differ, 1e-3))
    return rows


def check_ptm(ctx):
    from topicjax.ptm import gem, layout as ptm_layout

    corpus = ctx.corpora["kos"]
    M = ctx.sizes.check_topics * 2
    data = ptm_layout.ptm_data(corpus)
    state = on(cpu_device(), lambda d: gem.init_state(jax.random.key(0), d, M), data)

    def one(state, data):
        s = gem.gem_step(state, data)
        return s, gem.state_bic(s, data, "2014")

    (g, g_bic), (c, c_bic) = on(ctx.device, one, state, data), on(cpu_device(), one, state, data)
    rows = [("PTM GEM iteration: BIC (relative)", abs(g_bic - c_bic) / abs(c_bic), 1e-5)]
    switches = float(np.mean(np.asarray(g.u) != np.asarray(c.u))) + float(np.mean(np.asarray(g.v) != np.asarray(c.v)))
    rows.append(("PTM GEM iteration: share of word + topic switches set differently", switches, 1e-3))
    return rows


def check_hypergradient(ctx):
    from topicjax import regularizers as R
    from topicjax import tune

    corpus = ctx.corpora["kos"]
    train, valid = corpus.train_test_split(0.2, seed=0)
    valid = valid.with_vocab(train.vocab, empty_docs="drop")
    T = ctx.sizes.check_topics

    def grad(_):
        base = tj.ARTM(T, regularizers=[(R.smooth_phi(), 0.1), (R.sparse_theta(), 0.1)], max_iter=5,
                       random_state=0, progress=False, scores=())
        obj = tune.heldout_perplexity_loss(*valid.completion_split(seed=1))
        res = tune.tune(base, train, obj, {"smooth_phi": (1e-3, 10.0), "sparse_theta": (1e-3, 3.0)}, n_steps=1,
                        progress=False, refit=False)
        rec = res.history[0]
        # two leaves: the objective and the gradient are each compared at their own scale
        return np.array([rec["objective"]]), np.array([v for k, v in rec.items() if k.startswith("grad/")])

    g, c = on(ctx.device, grad, 0), on(cpu_device(), grad, 0)
    return [("hypergradient (tuner step): objective and d/d log τ", rel_diff(g, c), 1e-3)]


CHECKS = [check_estep_mstep, check_fits, check_lida, check_ptm, check_hypergradient]


# ------------------------------------------------------------------------------------ diagnoses
# Not run by default (``--only diag_lida,diag_ttmm,lda_modes``): where a check or target fails,
# these say which step differs or what another sampler mode would give.
def diag_lida(ctx):
    """Which step of a LIDA-family sweep differs between the devices: the masks (topic / word
    activations) alone, then the token assignments from the same (CPU) masks; and whether the
    accelerator repeats itself."""
    from topicjax.lida import sampler as lida_sampler, state as lida_state
    from topicjax.lida import sampler as S

    corpus = ctx.corpora["kos"]
    K = ctx.sizes.check_topics * 4
    rows = []
    for variant in ("ftm", "sstm", "lida"):
        tokens = lida_state.make_tokens(corpus)
        cfg = lida_state.Config(variant=variant, n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                       n_rows=corpus.n_words, n_tokens=int(corpus.n_tokens), sample=())
        hyper = dict(alpha=0.1, beta=0.01, eta=5.0, delta=1.0, gamma=50.0, xi=1.0)
        state = lida_state.init_state(jax.random.key(0), tokens, cfg, hyper, K)
        key = jax.random.key(1)

        def masks(state, tokens):
            return S.mask_step(state, key, tokens, cfg)

        g, g2, c = on(ctx.device, masks, state, tokens), on(ctx.device, masks, state, tokens), on(cpu_device(), masks, state, tokens)
        row = {"variant": variant, "theta_bar_differ": int(np.sum(g[0] != c[0])), "phi_bar_differ": int(np.sum(g[1] != c[1])),
               "overflow_gpu_cpu": [int(g[2]), int(c[2]), int(g[3]), int(c[3])],
               "gpu_repeats_masks": bool(all(np.array_equal(a, b) for a, b in zip(g, g2))),
               "theta_bar_on": int(np.sum(c[0])), "phi_bar_on": int(np.sum(c[1]))}
        masked = state._replace(theta_bar=jnp.asarray(c[0]), phi_bar=jnp.asarray(c[1]), overflow_topics=jnp.asarray(c[2]),
                                overflow_words=jnp.asarray(c[3]))
        ncfg = S._normalised(cfg)
        n_active = min(K, max(32, S.pow2(int(np.max(np.sum(c[0], axis=1))))))

        def assign(masked, tokens):
            return S._assign_jit(masked, key, tokens, ncfg, n_active, False).z

        zg, zg2, zc = on(ctx.device, assign, masked, tokens), on(ctx.device, assign, masked, tokens), on(cpu_device(), assign, masked, tokens)
        row["z_differ_same_masks"] = float(np.mean(zg != zc))
        row["gpu_repeats_z"] = bool(np.array_equal(zg, zg2))
        rows.append(row)
        ctx.log(f"  {row}")
    return rows


def diag_ttmm(ctx):
    """TTMM EM, GPU against CPU after 1, 2, 3, 5, 10 iterations, per parameter."""
    corpus = ctx.corpora["kos"]
    T = ctx.sizes.check_topics
    rows = []
    for n in (1, 2, 3, 5, 10):
        def fit(_):
            m = tj.TTMM(T, n_themes=3, max_iter=n, tol=0.0, random_state=0, progress=False).fit(corpus)
            return tuple(np.asarray(x) for x in (m.pi_, m.tau_, m.beta_)) + (np.asarray(m.loglik_history_),)

        g, g2, c = on(ctx.device, fit, 0), on(ctx.device, fit, 0), on(cpu_device(), fit, 0)
        row = {"iterations": n, **{k: rel_diff(a, b) for k, a, b in zip(("pi", "tau", "beta", "loglik"), g, c)},
               "gpu_repeats": bool(all(np.array_equal(a, b) for a, b in zip(g, g2))),
               "min_tau": float(np.min(c[1])), "min_pi": float(np.min(c[0]))}
        rows.append(row)
        ctx.log(f"  {row}")
    # the EM step alone, from one initial state on both devices
    from topicjax.ttmm import em as ttmm_em, sweeps

    state = on(cpu_device(), lambda: ttmm_em.em_init(jax.random.key(0), 3, T, corpus.n_words, corpus.n_docs))
    data = sweeps.theme_layout(corpus, 3)
    for n in (1, 10):
        def steps(state, data):
            for _ in range(n):
                state = ttmm_em.em_step(state, data)
            return tuple(state.params)

        g, g2, c = on(ctx.device, steps, state, data), on(ctx.device, steps, state, data), on(cpu_device(), steps, state, data)
        row = {"em_steps_from_one_state": n, **{k: rel_diff(a, b) for k, a, b in zip(("pi", "tau", "beta"), g, c)},
               "gpu_repeats": bool(all(np.array_equal(a, b) for a, b in zip(g, g2)))}
        rows.append(row)
        ctx.log(f"  {row}")
    return rows


def lda_modes(ctx):
    """Tokens/s of the other LDA sampler modes on this device: the parallel sweep with one block
    (AD-LDA over all documents at once) and the stale sweep (approximate) with two batch sizes."""
    from dataclasses import replace

    from topicjax.lida import sampler as lida_sampler, state as lida_state

    corpus = ctx.corpora["kos"]
    K = ctx.sizes.lda_k
    N = int(corpus.n_tokens)
    rows = []
    for label, mode, block, batch in (("parallel, one block", "parallel", N, 65536),
                                      ("stale, batches of 65,536", "stale", 65536, 65536),
                                      ("stale, one batch", "stale", 65536, N)):
        tokens = lida_state.make_tokens(corpus, block_tokens=block)
        cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words, n_rows=corpus.n_words,
                       n_tokens=N, mode=mode, sample=())
        cfg = replace(cfg, batch=batch)
        state = lida_state.init_state(jax.random.key(0), tokens, cfg, dict(alpha=0.1, beta=0.01, eta=1.0, delta=1.0, gamma=1.0,
                                                                 xi=1.0), K)
        state = jax.block_until_ready(lida_sampler.sweep(state, jax.random.key(1), tokens, cfg))
        t0 = time.perf_counter()
        for i in range(ctx.sizes.lda_sweeps):
            state = lida_sampler.sweep(state, jax.random.key(2 + i), tokens, cfg)
        jax.block_until_ready(state)
        s = (time.perf_counter() - t0) / ctx.sizes.lda_sweeps
        rows.append({"sampler": label, "s_per_sweep": s, "mtok_s": N / s / 1e6, "vs_tomotopy_2w": N / s / 1e6 / TOMOTOPY_2W_MTOK})
        ctx.log(f"  {rows[-1]}")
    return rows


def _spmm_pass(phi, theta, rows, cols, counts, by_word, w_ptr, d_ptr, block: int):
    """One plain PLSA EM pass written with two sparse-dense products (a prototype for the GPU):
    p_dw = φ_w·θ_d per non-zero (in blocks of ``block`` non-zeros: no nnz x T temporary),
    ∂L/∂Θ = (N/P) Φ from the document-sorted CSR, ∂L/∂Φ = (N/P)ᵀ Θᵀ from the word-sorted one."""
    from jax.experimental import sparse

    W, T = phi.shape
    D = theta.shape[1]
    nnz = rows.shape[0]
    pad = -nnz % block
    r_b = jnp.pad(rows, (0, pad)).reshape(-1, block)
    c_b = jnp.pad(cols, (0, pad)).reshape(-1, block)
    theta_t = theta.T

    def dots(args):
        d, w = args
        return jnp.sum(phi[w] * theta_t[d], axis=1)

    p = jax.lax.map(dots, (r_b, c_b)).reshape(-1)[:nnz]
    ratio = counts / jnp.maximum(p, 1e-30)
    by_doc = sparse.BCSR((ratio, cols, d_ptr), shape=(D, W), indices_sorted=True, unique_indices=True)
    by_w = sparse.BCSR((ratio[by_word], rows[by_word], w_ptr), shape=(W, D), indices_sorted=True, unique_indices=True)
    g_theta = (by_doc @ phi).T
    g_phi = by_w @ theta_t
    n_wt, n_td = phi * g_phi, theta * g_theta
    return n_wt / jnp.maximum(n_wt.sum(0), 1e-30), n_td / jnp.maximum(n_td.sum(0), 1e-30)


def estep_variants(ctx):
    """The PLSA pass on this device with larger layout chunks (fewer loop iterations) and as a
    sparse-dense-product prototype (:func:`_spmm_pass`), KOS / 20NG / NYTimes-sized, T = 100."""
    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    T = 100 if not ctx.sizes.dry else 8
    rows_out = []
    cases = [(n, c) for n, c in ctx.corpora.items()]
    for name, corpus in cases:
        step = em.make_step()
        state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
        ref = None
        for mult in (1, 4, 16, 0):
            chunk = layout.ACCEL_CHUNK * mult if mult else int(corpus.nnz) + layout.PIECE
            data = layout.prepare(corpus, chunk=chunk)
            box = [jax.block_until_ready(step(state, data))]
            ref = box[0] if ref is None else ref

            def one():
                box[0] = step(box[0], data)
                return box[0].phi

            ms = median_time(one, ctx.sizes.rounds) * 1e3
            rows_out.append({"corpus": name, "variant": f"sliced, chunk {chunk:,}", "ms": ms})
            ctx.log(f"  {rows_out[-1]}")
        rows = jnp.asarray(corpus.doc_ids.astype(np.int32))
        cols = jnp.asarray(corpus.word_ids.astype(np.int32))
        counts = jnp.asarray(corpus.counts.astype(np.float32))
        order = np.argsort(corpus.word_ids, kind="stable").astype(np.int32)
        w_ptr = jnp.asarray(np.concatenate([[0], np.cumsum(np.bincount(corpus.word_ids, minlength=corpus.n_words))]).astype(np.int32))
        d_ptr = jnp.asarray(np.asarray(corpus.doc_offsets).astype(np.int32))
        by_word = jnp.asarray(order)
        for block in (65536, 1 << 20):
            f = jax.jit(lambda ph, th: _spmm_pass(ph, th, rows, cols, counts, by_word, w_ptr, d_ptr, block))
            try:
                out = jax.block_until_ready(f(state.phi, state.theta))
                diff = rel_diff((out[0], out[1]), (ref.phi, ref.theta))
                box = [out]

                def one():
                    box[0] = f(*box[0])
                    return box[0][0]

                ms = median_time(one, ctx.sizes.rounds) * 1e3
                rows_out.append({"corpus": name, "variant": f"SpMM prototype, p in blocks of {block:,}", "ms": ms,
                                 "rel_diff_vs_sliced": diff})
            except Exception as e:
                rows_out.append({"corpus": name, "variant": f"SpMM prototype, blocks {block}", "error": repr(e)[:300]})
            ctx.log(f"  {rows_out[-1]}")
    return rows_out


DIAGNOSES = [("diag_lida", diag_lida), ("diag_ttmm", diag_ttmm), ("lda_modes", lda_modes), ("estep_variants", estep_variants)]


# ------------------------------------------------------------------------------------ timings
def time_passes(ctx):
    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    rows = []
    for name in ("kos", "20ng"):
        corpus = ctx.corpora[name]
        data = layout.prepare(corpus)
        stats = RL.stats_of_layout(data.word, data.piece_doc, corpus.n_docs, corpus.n_words, corpus.nnz,
                                   corpus.n_tokens)
        step = em.make_step()
        for T in ctx.sizes.topics:
            state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
            t0 = time.perf_counter()
            state = jax.block_until_ready(step(state, data))
            first = time.perf_counter() - t0
            box = [state]

            def one():
                box[0] = step(box[0], data)
                return box[0].phi

            s = median_time(one, ctx.sizes.rounds)
            loop_s = loop_pass_time(box[0], data, ctx.sizes.loop_passes, max(3, ctx.sizes.rounds // 4))
            cost = RL.pass_cost(stats, T, ctx.rl_device)
            row = {"corpus": name, "T": T, "nnz": int(corpus.nnz), "slots": stats.slots, "ms": s * 1e3,
                   "loop_ms": loop_s * 1e3, "loop_passes": ctx.sizes.loop_passes, "first_s": first}
            rows.append(with_limit(with_limit(row, cost, s), cost, loop_s, "loop_"))
            ctx.log(f"pass {name} T={T}: {s * 1e3:.3f} ms per call, {loop_s * 1e3:.3f} ms in a compiled loop "
                    f"(limit {cost.limit_s * 1e3:.3f} ms; first call {first:.2f} s)")
    return rows


def nytimes_layout(ctx):
    """The sliced layout (numpy) of a generated NYTimes-sized corpus, built chunk by chunk."""
    from topicjax.core import layout

    gen = synthetic.LDAGenerator(**ctx.sizes.nytimes, n_topics=100, seed=0)
    t0 = time.perf_counter()
    parts = list(gen.chunks(20_000 if not ctx.sizes.dry else 100))
    offsets = np.concatenate([[0]] + [p.offsets[1:] + sum(q.offsets[-1] for q in parts[:i])
                                      for i, p in enumerate(parts)])
    word_ids = np.concatenate([p.word_ids for p in parts])
    counts = np.concatenate([p.counts for p in parts])
    gen_s = time.perf_counter() - t0
    del parts
    k = layout.ACCEL_CHUNK // layout.PIECE
    arrays = layout.sliced_layout(offsets, word_ids, counts, layout.PIECE, k)
    info = {"docs": gen.n_docs, "words": gen.n_words, "nnz": int(word_ids.size), "tokens": int(counts.sum()),
            "generate_s": gen_s, "layout_s": time.perf_counter() - t0 - gen_s}
    return arrays, info


def time_nytimes(ctx):
    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    arrays, info = nytimes_layout(ctx)
    T = 100 if not ctx.sizes.dry else 8
    need = sum(a.nbytes for a in arrays) + 3 * 4 * T * (info["docs"] + info["words"]) * 2
    free = device_free_bytes(ctx.device)
    info.update(T=T, need_bytes=need, free_bytes=free)
    if free is not None and need > 0.8 * free:
        info["skipped"] = f"needs about {need / 2**30:.1f} GiB, the device has {free / 2**30:.1f} GiB free"
        return info
    stats = RL.stats_of_layout(arrays[1], arrays[3], info["docs"], info["words"], info["nnz"], info["tokens"])
    data = layout.DocWordCounts(*(jnp.asarray(a) for a in arrays))
    del arrays
    step = em.make_step()
    state = em.init(jax.random.key(0), info["words"], info["docs"], T)
    t0 = time.perf_counter()
    state = jax.block_until_ready(step(state, data))
    info["first_s"] = time.perf_counter() - t0
    box = [state]

    def one():
        box[0] = step(box[0], data)
        return box[0].phi

    info["pass_s"] = median_time(one, 3 if ctx.sizes.dry else 5)
    info["slots"] = stats.slots
    with_limit(info, RL.pass_cost(stats, T, ctx.rl_device), info["pass_s"])
    try:
        compiled = jax.jit(lambda s, d: step(s, d)).lower(box[0], data).compile()
        ma = compiled.memory_analysis()
        info["temp_bytes"] = int(ma.temp_size_in_bytes)
    except Exception as e:  # memory_analysis is not on every backend
        info["temp_bytes"] = f"unavailable ({type(e).__name__})"
    ctx.log(f"NYTimes-sized pass T={T}: {info['pass_s']:.4f} s ({info['nnz']:,} non-zeros)")
    return info


def device_free_bytes(device):
    try:
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    except Exception:
        pass
    return None


def time_grid(ctx):
    import bench_grid

    corpus = ctx.corpora["kos"]
    G, T, iters = ctx.sizes.grid_models, ctx.sizes.grid_topics, ctx.sizes.grid_iters
    taus = bench_grid.grid_taus(G)
    seq, seq_warm, seq_models = bench_grid.run_sequential(corpus, T, taus, iters)
    grid, first, models = bench_grid.run_grid(corpus, T, taus, iters, f"vmap:{G}")
    diff = max(float(np.abs(m.phi_ - s.phi_).max()) for m, s in zip(models, seq_models))
    ctx.log(f"grid {G} models: sequential {seq:.2f} s, fit_many {grid:.2f} s (first {first:.2f} s)")
    row = {"corpus": "kos", "models": G, "T": T, "iterations": iters, "sequential_s": seq,
           "sequential_first_fit_s": seq_warm, "grid_s": grid, "grid_first_s": first, "speedup": seq / grid,
           "max_phi_diff": diff}
    stats = RL.layout_stats(corpus, accelerator=ctx.backend != "cpu")
    # G x iters passes of one model (one program each: a launch per pass), or iters batched passes
    with_limit(row, RL.pass_cost(stats, T, ctx.rl_device).scaled(G * iters), seq, "sequential_")
    row.pop("roofline")
    return with_limit(row, RL.pass_cost(stats, T, ctx.rl_device, models=G).scaled(iters), grid, "grid_")


def time_lda(ctx):
    import bench_lda_tomotopy as B

    corpus = ctx.corpora["kos"]
    K = ctx.sizes.lda_k
    stats = RL.layout_stats(corpus, accelerator=ctx.backend != "cpu")
    rows = []
    for label, block, mh in (("default blocks", 65536, 0), ("default blocks, 2 MH steps", 65536, 2),
                             ("4 blocks", -(-int(corpus.n_tokens) // 4), 0)):
        sampler = B.Ours(corpus, K, 0.1, 0.01, "parallel", mh, block, seed=0, backend="xla")
        sampler.run(1)  # warm
        secs = [sampler.run(ctx.sizes.lda_sweeps) for _ in range(2)]
        s = min(secs) / ctx.sizes.lda_sweeps
        mtok = corpus.n_tokens / s / 1e6
        cost = RL.sweep_cost(stats, K, ctx.rl_device, mh_steps=mh)
        rows.append(with_limit({"sampler": label, "K": K, "block_tokens": block, "mh_steps": mh, "s_per_sweep": s,
                                "mtok_s": mtok, "vs_tomotopy_2w": mtok / TOMOTOPY_2W_MTOK,
                                "limit_mtok_s": corpus.n_tokens / cost.limit_s / 1e6}, cost, s))
        ctx.log(f"LDA sweep {label}: {mtok:.2f} M tokens/s (limit {rows[-1]['limit_mtok_s']:.0f} M tokens/s)")
    return rows


def time_ptm(ctx):
    from topicjax.ptm import gem, layout as ptm_layout

    corpus = ctx.corpora["20ng"]
    M = ctx.sizes.ptm_m
    t0 = time.perf_counter()
    data = ptm_layout.ptm_data(corpus)
    state = gem.init_state(jax.random.key(0), data, M)
    state = jax.block_until_ready(gem.gem_step(state, data))
    first = time.perf_counter() - t0
    box = [state]

    def one():
        box[0] = gem.gem_step(box[0], data)
        return box[0].beta

    s = median_time(one, 3)
    ctx.log(f"PTM GEM iteration 20NG M={M}: {s:.3f} s")
    # a lower bound: the iteration's E-step is a sweep over the non-zeros at M topics, as a PLSA pass
    bound = RL.pass_cost(RL.layout_stats(corpus, accelerator=ctx.backend != "cpu"), M, ctx.rl_device)
    return with_limit({"corpus": "20ng", "M": M, "gem_iteration_s": s, "prepare_init_first_s": first}, bound, s)


def time_tuner(ctx):
    from topicjax import regularizers as R
    from topicjax import tune

    corpus = ctx.corpora["kos"]
    train, valid = corpus.train_test_split(0.1, seed=0)
    valid = valid.with_vocab(train.vocab, empty_docs="drop")
    T, iters = ctx.sizes.tune_topics, ctx.sizes.tune_iters
    base = tj.ARTM(T, regularizers=[(R.smooth_phi(), 0.1), (R.sparse_theta(), 0.1), (R.decorrelate(), 1.0)],
                   max_iter=iters, random_state=0, progress=False, scores=())
    obj = tune.heldout_perplexity_loss(*valid.completion_split(seed=1))
    scale = train.n_tokens / T ** 2
    box = {"smooth_phi": (1e-3, 10.0), "sparse_theta": (1e-3, 3.0), "decorrelate": (1e-2 * scale, 1e1 * scale)}
    res = tune.tune(base, train, obj, box, n_steps=4, progress=False, refit=False)
    secs = [r["seconds"] for r in res.history]
    step_s = statistics.median(secs[1:])
    ctx.log(f"tuner step KOS T={T}, {iters} iterations: {step_s:.3f} s")
    # a lower bound: the step's forward EM iterations, one pass each (its reverse sweep is extra)
    bound = RL.pass_cost(RL.layout_stats(train, accelerator=ctx.backend != "cpu"), T, ctx.rl_device).scaled(iters)
    return with_limit({"corpus": "kos", "T": T, "iterations": iters, "step_s": step_s, "first_step_s": secs[0]},
                      bound, step_s)


# ------------------------------------------------------------------------------------ A/B
def ab_child(dry: bool) -> int:
    """The work of one A/B child (``--ab-child``): the KOS pass at T = 100 (dry run: tiny sizes)
    under this process's ``TOPICJAX_ESTEP`` and ``XLA_FLAGS``, per call and in a compiled loop,
    and L after five passes from a fixed start (so the variants' results can be compared).  Prints
    one :data:`AB_MARK` line of JSON; an unknown ``TOPICJAX_ESTEP`` raises its ``ValueError``
    before anything runs."""
    from topicjax.artm import algorithm as em
    from topicjax.core import kernels, layout

    setting = kernels.get_backend()
    sizes = Sizes(dry)
    corpus = load_corpora(sizes, [], names=("kos",))["kos"]
    T = sizes.ab_topics
    data = layout.prepare(corpus)
    start = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
    step = em.make_step()
    t0 = time.perf_counter()
    box = [jax.block_until_ready(step(start, data))]
    first = time.perf_counter() - t0

    def one():
        box[0] = step(box[0], data)
        return box[0].phi

    call_s = median_time(one, sizes.rounds)
    loop_s = loop_pass_time(box[0], data, sizes.loop_passes, max(3, sizes.rounds // 4))
    state = start
    for _ in range(6):  # state.loglik is L before the last step: L after five passes
        state = step(state, data)
    out = {"estep": setting, "backend": jax.default_backend(), "xla_flags": os.environ.get("XLA_FLAGS", ""), "T": T,
           "call_ms": call_s * 1e3, "loop_ms": loop_s * 1e3, "first_s": first, "loglik_5": float(state.loglik)}
    print(AB_MARK + json.dumps(out), flush=True)
    return 0


def run_ab_child(cmd, env: dict, timeout: float) -> dict:
    """Run one A/B child: its :data:`AB_MARK` result with ``ok`` True, or ``ok`` False and
    ``error``: the exception line of its stderr (``ValueError: TOPICJAX_ESTEP must be ...``), else
    its last line, with the exit status; or the timeout."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(AB_MARK):
            return {"ok": True, **json.loads(line[len(AB_MARK):])}
    lines = [x.strip() for x in (proc.stderr or "").splitlines() + (proc.stdout or "").splitlines() if x.strip()]
    err = next((x for x in reversed(lines) if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", x)),
               lines[-1] if lines else "no output")
    return {"ok": False, "error": f"exit status {proc.returncode}: {err}"[:600]}


def time_ab(ctx):
    """The KOS pass (T = 100) of each E-step of :data:`AB_ESTEPS`, without and with
    :data:`FTZ_FLAG` (``Sizes.ab_pairs``), each in its own process (the E-step setting and XLA's
    flags are read once per process); every child gets the budget that is left, at most 2 minutes."""
    rows = []
    base_flags = os.environ.get("XLA_FLAGS", "").strip()
    stats = RL.layout_stats(ctx.corpora["kos"], accelerator=ctx.backend != "cpu")
    for estep, ftz in ctx.sizes.ab_pairs:
        label = f"TOPICJAX_ESTEP={estep}" + (f", {FTZ_FLAG}" if ftz else "")
        left = ctx.args.budget - (time.perf_counter() - ctx.t0)
        if left < 10:
            rows.append({"label": label, "estep_env": estep, "ftz": ftz, "ok": False,
                         "error": f"skipped: {left:.0f} s of the budget left"})
            continue
        flags = f"{base_flags} {FTZ_FLAG}".strip() if ftz else base_flags
        # the parent holds most of the accelerator's memory (JAX preallocates): the child takes what
        # it needs only
        env = dict(os.environ, TOPICJAX_ESTEP=estep, XLA_FLAGS=flags, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--ab-child"] + (["--dry-run"] if ctx.sizes.dry else [])
        t0 = time.perf_counter()
        r = run_ab_child(cmd, env, timeout=min(120.0, left))
        r.update(label=label, estep_env=estep, ftz=ftz, wall_s=time.perf_counter() - t0)
        if r["ok"]:
            cost = RL.pass_cost(stats, r["T"], ctx.rl_device)
            with_limit(with_limit(r, cost, r["call_ms"] / 1e3), cost, r["loop_ms"] / 1e3, "loop_")
            ctx.log(f"  {label}: {r['call_ms']:.3f} ms per call, {r['loop_ms']:.3f} ms in a loop "
                    f"({r['loop_ratio']:.1f}x the limit)")
        else:
            ctx.log(f"  {label}: FAILED: {r['error']}")
        rows.append(r)
    ref = next((r for r in rows if r["ok"]), None)
    for r in rows:
        if r["ok"] and ref is not None:
            r["loglik_rel_diff"] = abs(r["loglik_5"] - ref["loglik_5"]) / max(abs(ref["loglik_5"]), 1e-30)
    return rows


TIMINGS = [("passes", time_passes), ("ab", time_ab), ("nytimes", time_nytimes), ("grid", time_grid),
           ("lda", time_lda), ("ptm", time_ptm), ("tuner", time_tuner)]


# ------------------------------------------------------------------------------------ profile
def summarize_trace(folder: Path, top: int = 12) -> list[dict]:
    """The busiest device operations of a ``jax.profiler`` trace (its Perfetto JSON): total and
    count per name on the accelerator's streams (every process when no device process is named)."""
    files = sorted(folder.rglob("*.trace.json.gz")) + sorted(folder.rglob("perfetto_trace.json.gz"))
    if not files:
        raise FileNotFoundError(f"no trace JSON under {folder}: {[str(p) for p in folder.rglob('*')][:10]}")
    with gzip.open(files[-1], "rt") as fh:
        events = json.load(fh)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    names = {e.get("pid"): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device_pids = {p for p, n in names.items() if re.search(r"gpu|device|stream|cuda", str(n), re.I)
                   and not re.search(r"host|cpu", str(n), re.I)}
    totals: dict = {}
    for e in events:
        if e.get("ph") != "X" or (device_pids and e.get("pid") not in device_pids):
            continue
        if str(e.get("name", "")).startswith("$"):  # the Python tracer's host frames
            continue
        name = str(e.get("name", "?"))[:80]
        t = totals.setdefault(name, [0.0, 0])
        t[0] += float(e.get("dur", 0.0))
        t[1] += 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    all_us = sum(v[0] for v in totals.values()) or 1.0
    return [{"name": n, "ms": v[0] / 1e3, "count": v[1], "share": v[0] / all_us} for n, v in rows]


def profile(ctx):
    from topicjax.lida import sampler as lida_sampler, state as lida_state
    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    corpus = ctx.corpora["kos"]
    T = ctx.sizes.profile_topics
    data = layout.prepare(corpus)
    step = em.make_step()
    state = jax.block_until_ready(step(em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T), data))
    tokens = lida_state.make_tokens(corpus)
    K = ctx.sizes.lda_k
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words, n_rows=corpus.n_words,
                   n_tokens=int(corpus.n_tokens), sample=(), unroll=8 if ctx.backend == "gpu" else 1)
    lstate = lida_state.init_state(jax.random.key(0), tokens, cfg, dict(alpha=0.1, beta=0.01, eta=1.0, delta=1.0,
                                                              gamma=1.0, xi=1.0), K)
    lstate = jax.block_until_ready(lida_sampler.sweep(lstate, jax.random.key(1), tokens, cfg))
    out = {}
    for label, run in ((f"PLSA pass, KOS T={T}, 10 passes", lambda s: step(s, data)),
                       (f"LDA sweep, KOS K={K}, 3 sweeps", None)):
        folder = Path(tempfile.mkdtemp(prefix="tj-trace-"))
        with jax.profiler.trace(str(folder), create_perfetto_trace=True):
            if run is not None:
                s = state
                for _ in range(10):
                    s = run(s)
                jax.block_until_ready(s)
            else:
                s = lstate
                for i in range(3):
                    s = lida_sampler.sweep(s, jax.random.key(2 + i), tokens, cfg)
                jax.block_until_ready(s)
        out[label] = summarize_trace(folder)
        if ctx.out_dir is not None:
            for f in list(folder.rglob("perfetto_trace.json.gz"))[:1]:
                tag = "plsa" if run is not None else "lda"
                (ctx.out_dir / f"trace_{tag}.json.gz").write_bytes(f.read_bytes())
    return out


# ------------------------------------------------------------------------------------ report
class Context:
    def __init__(self, args):
        self.args = args
        self.sizes = Sizes(args.dry_run)
        self.device = jax.devices()[0]
        self.backend = jax.default_backend()
        self.notes: list[str] = []
        self.results: dict = {"checks": [], "timings": {}, "profile": {}, "errors": {}, "skipped": []}
        self.t0 = time.perf_counter()
        self.out_dir = Path(args.out_dir) if args.out_dir else None
        self.corpora = None
        self.rl_device, self.rl_note = roofline_device(args.roofline_device, self.device.device_kind)

    def log(self, msg):
        print(f"[{time.perf_counter() - self.t0:6.1f} s] {msg}", flush=True)

    def over_budget(self) -> bool:
        return time.perf_counter() - self.t0 > self.args.budget


def roofline_device(name: str, device_kind: str):
    """``(roofline.Device, note)`` for ``--roofline-device`` ``name`` (``auto``: ``device_kind``, the
    H100's figures for a device not in the table, with a note saying so)."""
    if name != "auto":
        return RL.device_spec(name), ""
    try:
        return RL.device_spec(device_kind), ""
    except ValueError:
        return RL.DEVICES["h100"], (f"{device_kind} is not in the roofline table: the limits are an H100's "
                                    "(nominal only)")


def fmt(x, spec=".3g"):
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def write_report(ctx, path: Path, argv):
    r = ctx.results
    dev = ctx.device
    lines = [
        f"# Device check: {dev.device_kind} ({ctx.backend})" + (" — DRY RUN (CPU, tiny sizes)" if ctx.sizes.dry else ""),
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in ['python', 'experiments/device_check.py', *argv])}`",
        "",
        f"Date: {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}.  Device: {dev.device_kind} ({dev.platform}), "
        f"{len(jax.devices())} device(s).  jax {jax.__version__}, jaxlib {_jaxlib_version()}, "
        f"numpy {np.__version__}, Python {platform.python_version()}, host {platform.machine()} with {os.cpu_count()} CPUs.  "
        f"Load average at the start: {ctx.results.get('load_start', '?')}.  Elapsed: {time.perf_counter() - ctx.t0:.0f} s.",
        "",
    ]
    if ctx.notes:
        lines += ["Notes: " + " ".join(ctx.notes), ""]
    lines += ["## 1. Checks: the accelerator against the host CPU (float32)", "",
              "| computation | difference | tolerance | ok |", "|---|---|---|---|"]
    for name, diff, tol in r["checks"]:
        lines.append(f"| {name} | {diff:.2e} | {tol:.0e} | {'yes' if diff <= tol else '**NO**'} |")
    lines.append("")
    t = r["timings"]
    lines += ["## 2. Timings (warm-up and compilation excluded)", ""]
    d = ctx.rl_device
    lines += [f"Roofline limits (`experiments/roofline.py`): {d.name}, HBM {d.hbm_bytes_per_s / 1e12:.2f} TB/s, "
              f"L2 {d.l2_bytes / 2**20:.0f} MiB at {d.l2_bytes_per_s / 1e12:.1f} TB/s (an estimate), FP32 "
              f"{d.fp32_flops / 1e12:.0f} TFLOP/s, {d.launch_s * 1e6:.0f} µs per launch, one launch per pass or "
              "sweep; ratio = measured / limit." + (f"  {ctx.rl_note}." if ctx.rl_note else ""), ""]
    if "passes" in t:
        n = ctx.sizes.loop_passes
        lines += ["### PLSA EM pass (one E-step + M-step of `em.make_step`; per call: median of "
                  f"{ctx.sizes.rounds} calls; in a loop: one compiled `fori_loop` of {n} passes)", "",
                  "| corpus | non-zeros | slots | T | ms per call | ms in a loop | limit (ms) | ratio (call) | "
                  "ratio (loop) | first call (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {p['corpus']} | {p['nnz']:,} | {p.get('slots', 0):,} | {p['T']} | {p['ms']:.3f} | "
                  f"{fmt(p.get('loop_ms'), '.3f')} | {fmt(p.get('limit_ms'), '.4f')} | {fmt(p.get('ratio'), '.1f')} | "
                  f"{fmt(p.get('loop_ratio'), '.1f')} | {p['first_s']:.2f} |" for p in t["passes"]]
        lines.append("")
    if "ab" in t:
        lines += ["### A/B: the E-step and XLA's flush-to-zero flag (KOS, one child process each)", "",
                  "| setting | ms per call | ms in a loop | limit (ms) | ratio (loop) | L after 5 passes "
                  "(rel. diff. to the first) | status |", "|---|---|---|---|---|---|---|"]
        for a in t["ab"]:
            if a.get("ok"):
                lines.append(f"| {a['label']} | {a['call_ms']:.3f} | {a['loop_ms']:.3f} | {a['limit_ms']:.4f} | "
                             f"{a['loop_ratio']:.1f} | {a['loglik_5']:.6g} ({a.get('loglik_rel_diff', 0.0):.1e}) | ok "
                             f"(E-step {a['estep']}, {a['wall_s']:.0f} s) |")
            else:
                lines.append(f"| {a['label']} | — | — | — | — | — | failed: {a['error']} |")
        lines.append("")
    if "nytimes" in t:
        n = t["nytimes"]
        lines += ["### NYTimes-sized generated corpus (`topicjax.data.synthetic`, preset `nytimes`)", ""]
        lines.append(f"{n.get('docs', '?'):,} documents, {n.get('words', '?'):,} words, {n.get('nnz', 0):,} non-zeros, "
                     f"{n.get('tokens', 0):,} tokens; generated in {fmt(n.get('generate_s'))} s, layout "
                     f"{fmt(n.get('layout_s'))} s (host).  " + (f"Skipped: {n['skipped']}." if "skipped" in n else
                     f"T = {n['T']}: **{n['pass_s']:.4f} s per pass** (first call {n['first_s']:.1f} s); limit "
                     f"{fmt(n.get('limit_ms'), '.3f')} ms, ratio {fmt(n.get('ratio'), '.1f')}; temporaries "
                     f"of the compiled step: {fmt(n.get('temp_bytes'), ',')} bytes."))
        lines.append("")
    if "grid" in t:
        g = t["grid"]
        lines += ["### Many models in one call", "",
                  f"KOS, ARTM (Φ smoothing + Θ sparsing on a τ grid), T = {g['T']}, {g['iterations']} iterations: "
                  f"{g['models']} sequential `ARTM.fit` calls {g['sequential_s']:.2f} s (first, compiling fit "
                  f"{g['sequential_first_fit_s']:.2f} s); one `fit_many(mode='vmap', vmap_size={g['models']})` "
                  f"{g['grid_s']:.2f} s (first call {g['grid_first_s']:.2f} s): **{g['speedup']:.2f}x** end to end; "
                  f"max |ΔΦ| against the sequential fits {g['max_phi_diff']:.1e}.  Limits: sequential "
                  f"{fmt(g.get('sequential_limit_ms'), '.2f')} ms (ratio {fmt(g.get('sequential_ratio'), '.1f')}), "
                  f"fit_many {fmt(g.get('grid_limit_ms'), '.2f')} ms (ratio {fmt(g.get('grid_ratio'), '.1f')}).", ""]
    if "lda" in t:
        lines += ["### LDA Gibbs sweep (XLA parallel sweep, KOS, K = " f"{ctx.sizes.lda_k})", "",
                  "| sampler | block tokens | s per sweep | M tokens/s | ÷ tomotopy 2 workers (CPU, "
                  f"{TOMOTOPY_2W_MTOK} M tokens/s) | limit (ms) | limit (M tokens/s) | ratio |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {x['sampler']} | {x['block_tokens']:,} | {x['s_per_sweep']:.4f} | {x['mtok_s']:.2f} | "
                  f"{x['vs_tomotopy_2w']:.2f} | {fmt(x.get('limit_ms'), '.4f')} | {fmt(x.get('limit_mtok_s'), '.0f')} | "
                  f"{fmt(x.get('ratio'), '.0f')} |" for x in t["lda"]]
        lines.append("")
    if "ptm" in t:
        p = t["ptm"]
        lines += [f"### PTM: one GEM iteration on 20 Newsgroups, M = {p['M']}: **{p['gem_iteration_s']:.3f} s** "
                  f"(layout, initialisation and the first, compiling iteration {p['prepare_init_first_s']:.1f} s)", "",
                  f"Lower bound (its E-step, as a PLSA pass at T = M): {fmt(p.get('limit_ms'), '.3f')} ms, ratio "
                  f"{fmt(p.get('ratio'), '.0f')}.", ""]
    if "tuner" in t:
        u = t["tuner"]
        lines += [f"### Tuner: one step (hypergradient through {u['iterations']} EM iterations, KOS, T = {u['T']}, "
                  f"three coefficients): **{u['step_s']:.3f} s** (first, compiling step {u['first_step_s']:.1f} s)", "",
                  f"Lower bound (its forward passes alone): {fmt(u.get('limit_ms'), '.3f')} ms, ratio "
                  f"{fmt(u.get('ratio'), '.0f')}.", ""]
    lines += [f"## 3. Targets (issue 41; measured on {dev.device_kind}, an H200 counting like an H100)", "",
              "| target | measured | met |", "|---|---|---|"]
    for row in targets_table(ctx):
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if r["profile"]:
        lines += ["## 4. Profile (`jax.profiler` trace: the busiest device operations)", ""]
        for label, rows in r["profile"].items():
            lines += [f"**{label}**", "", "| operation | ms | count | share |", "|---|---|---|---|"]
            lines += [f"| `{x['name']}` | {x['ms']:.3f} | {x['count']} | {x['share']:.1%} |" for x in rows]
            lines.append("")
    if r.get("diagnoses"):
        lines += render_diagnoses(r["diagnoses"])
    if r["errors"]:
        lines += ["## Errors", ""]
        for k, v in r["errors"].items():
            lines += [f"**{k}**", "", "```", v.strip()[-3000:], "```", ""]
    if r["skipped"]:
        lines += [f"Skipped (over the {ctx.args.budget:.0f} s budget): {', '.join(r['skipped'])}.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    path.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))


def render_diagnoses(diagnoses: dict) -> list[str]:
    """Markdown tables of the diagnoses' rows (lists of flat dicts)."""
    lines = ["## Diagnoses", ""]
    for name, rows in diagnoses.items():
        keys = list(dict.fromkeys(k for row in rows for k in row))
        lines += [f"**{name}**", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        for row in rows:
            lines.append("| " + " | ".join(fmt(row.get(k, ""), ".3g") if isinstance(row.get(k), float)
                                           else str(row.get(k, "")) for k in keys) + " |")
        lines.append("")
    return lines


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return str(jaxlib.__version__)
    except Exception:
        return "?"


def timing_ratios(t: dict) -> list[tuple[str, float]]:
    """``(what, measured / roofline limit)`` of every timing in the results ``t`` that has one
    (the lower bounds of the PTM iteration and the tuner step included)."""
    out = []
    for p in t.get("passes", []):
        for key, how in (("ratio", "per call"), ("loop_ratio", "in a loop")):
            if key in p:
                out.append((f"pass {p['corpus']} T={p['T']} {how}", p[key]))
    for a in t.get("ab", []):
        if a.get("ok"):
            out += [(f"A/B {a['label']} per call", a["ratio"]), (f"A/B {a['label']} in a loop", a["loop_ratio"])]
    if "ratio" in t.get("nytimes", {}):
        out.append(("NYTimes-sized pass", t["nytimes"]["ratio"]))
    g = t.get("grid", {})
    for key, what in (("sequential_ratio", "sequential fits"), ("grid_ratio", "fit_many")):
        if key in g:
            out.append((what, g[key]))
    out += [(f"LDA sweep, {x['sampler']}", x["ratio"]) for x in t.get("lda", []) if "ratio" in x]
    for key, what in (("ptm", "PTM GEM iteration"), ("tuner", "tuner step")):
        if "ratio" in t.get(key, {}):
            out.append((what, t[key]["ratio"]))
    return out


def targets_table(ctx):
    t = ctx.results["timings"]
    rows = []
    yes = lambda ok: "yes" if ok else "no"  # noqa: E731
    kos = [p for p in t.get("passes", []) if p["corpus"] == "kos" and p["T"] == 100 and "loop_ms" in p]
    if kos:
        v = kos[0]["loop_ms"]
        rows.append(["KOS T=100 pass <= 0.15 ms inside a compiled loop", f"{v:.3f} ms",
                     yes(v <= TARGETS["kos_t100_loop_ms"])])
    n = t.get("nytimes", {})
    if "pass_s" in n:
        rows.append(["NYTimes-sized pass <= 15 ms", f"{n['pass_s'] * 1e3:.1f} ms", yes(n["pass_s"] <= TARGETS["nytimes_pass_s"])])
    exact = [x for x in t.get("lda", []) if x.get("mh_steps", 0) == 0]
    if exact:
        best = max(exact, key=lambda x: x["mtok_s"])
        rows.append(["exact LDA sweep (dense draw) on KOS, K = 100, >= 300 M tokens/s",
                     f"{best['mtok_s']:.1f} M tokens/s ({best['sampler']})", yes(best["mtok_s"] >= TARGETS["lda_exact_mtok"])])
    if "grid" in t:
        v = t["grid"]["speedup"]
        rows.append(["32 KOS ARTM fits in one call >= 10x 32 separate fits, end to end", f"{v:.2f}x",
                     yes(v >= TARGETS["grid_speedup"])])
    ratios = timing_ratios(t)
    if ratios:
        worst = max(ratios, key=lambda r: r[1])
        met = sum(r <= TARGETS["max_roofline_ratio"] for _, r in ratios)
        rows.append(["every timing <= 3x its roofline limit", f"{met} of {len(ratios)}; worst {worst[1]:.1f}x ({worst[0]})",
                     yes(met == len(ratios))])
    return rows


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the same code on CPU with tiny sizes, in seconds")
    ap.add_argument("--out", default=None, help="report path (default experiments/results/gpu_<date>_<device>.md)")
    ap.add_argument("--out-dir", default=None, help="also copy the report, its JSON and the traces here")
    ap.add_argument("--budget", type=float, default=280.0, help="seconds after which no new section starts")
    ap.add_argument("--only", default=None, help="comma-separated sections: checks, passes, ab, nytimes, grid, lda, "
                                                 "ptm, tuner, profile")
    ap.add_argument("--roofline-device", default="auto", choices=["auto", *RL.DEVICES],
                    help=f"device whose figures the limits use: auto (the one JAX reports) or one of {', '.join(RL.DEVICES)}")
    ap.add_argument("--ab-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ab_child:
        return ab_child(args.dry_run)
    if not args.budget > 0:
        ap.error(f"--budget must be a positive number of seconds, got {args.budget}")
    ctx = Context(args)
    ctx.results["load_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    kind = re.sub(r"[^A-Za-z0-9]+", "-", ctx.device.device_kind).strip("-").lower()
    today = _dt.date.today().isoformat()
    if args.out:
        out = Path(args.out)
    elif args.dry_run:
        out = Path(tempfile.mkdtemp(prefix="tj-devcheck-")) / f"gpu_{today}_{kind}_dry.md"
    else:
        out = ROOT / "experiments" / "results" / f"gpu_{today}_{kind}.md"
    if ctx.out_dir is not None:
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    ctx.log(f"device {ctx.device.device_kind} ({ctx.backend}); jax {jax.__version__}; report {out}")
    ctx.corpora = load_corpora(ctx.sizes, ctx.notes)
    ctx.log("corpora: " + ", ".join(f"{k} {c.n_docs} docs {c.nnz} nnz" for k, c in ctx.corpora.items()))

    def save():
        write_report(ctx, out, argv)
        if ctx.out_dir is not None and ctx.out_dir.resolve() != out.parent.resolve():
            for p in (out, out.with_suffix(".json")):
                (ctx.out_dir / p.name).write_bytes(p.read_bytes())

    sections = [(f.__name__, "checks", f) for f in CHECKS] + [(n, n, f) for n, f in TIMINGS] + [("profile", "profile", profile)]
    if only is not None:  # the diagnoses run only when named
        sections += [(n, "diagnoses", f) for n, f in DIAGNOSES]
    failed = False
    for name, group, fn in sections:
        if only is not None and group not in only and name not in only:
            continue
        if ctx.over_budget():
            ctx.results["skipped"].append(name)
            continue
        ctx.log(f"{name} ...")
        try:
            value = fn(ctx)
            if group == "checks":
                ctx.results["checks"].extend(value)
                for row in value:
                    ctx.log(f"  {row[0]}: {row[1]:.2e} (tolerance {row[2]:.0e})")
                    failed |= not row[1] <= row[2]
            elif group == "profile":
                ctx.results["profile"] = value
            elif group == "diagnoses":
                ctx.results.setdefault("diagnoses", {})[name] = value
            else:
                ctx.results["timings"][name] = value
        except Exception:
            ctx.results["errors"][name] = traceback.format_exc()
            ctx.log(f"  {name} FAILED:\n{traceback.format_exc()[-2000:]}")
            failed = True
        save()
    ctx.log(f"done; report {out}")
    print(out.read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
