"""Throughput of a batch of ARTM models in one compiled call against the same models fitted one
after another (issue 7, "many models in one call"), on whatever backend JAX runs on.

For a corpus and T, G models that differ in their regularization coefficients (τ of a Φ
smoothing and a Θ sparsing term, a G-point grid) are fitted for ``--iterations`` iterations:

* ``sequential``: G separate ``ARTM(...).fit`` calls, the way a notebook loops over a grid (the
  compiled step is cached across the calls, so only the first one compiles; that warm-up fit is
  not timed);
* ``MODE``: one ``ARTM.fit_many`` call for all G models in one of the batch driver's modes
  (:func:`topicjax.core.driver.run_many`): ``sequential`` (the models one after another inside one
  compiled call, each E-step on every core through the fused kernel), ``vmap:b`` (b models side
  by side, one E-step call for the b models), ``threads`` (one compiled call per thread, the
  models split between them); a first call compiles and is timed separately, the second is the
  throughput figure.

It prints model-iterations per second of each and the ratio grid / sequential, and the time of
one compiled PLSA pass (``em.make_step``) of a single model for reference.  Results go to
``experiments/results/bench_grid_<backend>.md`` with the machine and the exact command.

Example::

    JAX_PLATFORMS=cpu python experiments/bench_grid.py --corpus kos --topics 100 --models 32
    python experiments/bench_grid.py --corpus kos 20ng --topics 100 --models 32 --modes vmap:8 vmap:32   # GPU
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def pass_time(train, T, rounds):
    """Median seconds of one compiled PLSA step of one model (compile excluded)."""
    import jax

    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    data = layout.prepare(train)
    step = em.make_step()
    from topicjax.core.compiled import jit

    # compiled as one program (eagerly, each operation of the initialisation compiles one of its own)
    state = jit(em.init, static_argnums=(1, 2, 3))(jax.random.key(0), train.n_words, train.n_docs, T)
    state = jax.block_until_ready(step(state, data))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        state = jax.block_until_ready(step(state, data))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def grid_taus(G):
    """G (smoothing τ, sparsing τ) pairs on a log-spaced grid."""
    side = int(np.ceil(np.sqrt(G)))
    a = np.geomspace(1e-3, 1.0, side)
    b = np.geomspace(1e-3, 0.5, side)
    return np.stack(np.meshgrid(a, b), -1).reshape(-1, 2)[:G]


def make_base(T, iterations, seed=0):
    from topicjax import ARTM
    from topicjax import regularizers as R

    return ARTM(T, regularizers=[(R.smooth_phi(), 0.0), (R.sparse_theta(), 0.0)], max_iter=iterations,
                scores=(), progress=False, random_state=seed)


def run_sequential(train, T, taus, iterations):
    from sklearn.base import clone

    base = make_base(T, iterations)
    t0 = time.perf_counter()
    clone(base).set_params(regularizers=[(r, float(t)) for (r, _), t in zip(base.regularizers, taus[0])]).fit(train)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    models = []
    for row in taus:
        m = clone(base).set_params(regularizers=[(r, float(t)) for (r, _), t in zip(base.regularizers, row)])
        models.append(m.fit(train))
    return time.perf_counter() - t0, warm, models


def parse_mode(text):
    """``"vmap:8"`` -> ``("vmap", 8)``; ``"threads"`` -> ``("threads", None)``."""
    mode, _, size = text.partition(":")
    return mode, (int(size) if size else None)


def run_grid(train, T, taus, iterations, mode_text):
    base = make_base(T, iterations)
    mode, batch_size = parse_mode(mode_text)
    t0 = time.perf_counter()
    base.fit_many(train, taus=taus, mode=mode, vmap_size=batch_size)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    models = base.fit_many(train, taus=taus, mode=mode, vmap_size=batch_size)
    return time.perf_counter() - t0, first, models


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["kos"], help="kos, 20ng, bars, or a corpus path")
    ap.add_argument("--topics", nargs="+", type=int, default=[100])
    ap.add_argument("--models", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--modes", nargs="+", default=None,
                    help="fit_many modes: sequential, vmap:B (B models side by side), threads, devices "
                         "(default: sequential, vmap:4 and threads on CPU, vmap:G elsewhere)")
    ap.add_argument("--rounds", type=int, default=5, help="timed single-model passes")
    ap.add_argument("--quick", action="store_true", help="seconds-long smoke run on a synthetic corpus")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import jax

    from bench_em import load_corpus, machine

    from topicjax.core import kernels

    threads = f"{kernels.get_threads()} (fused kernel)" if kernels.available() else "1 (XLA; kernel not built)"

    backend = jax.default_backend()
    if args.quick:
        args.corpus, args.topics, args.models, args.iterations, args.rounds = ["bars"], [6], 4, 3, 2
    G = args.models
    modes = args.modes or (["sequential", "vmap:4", "threads"] if backend == "cpu" else [f"vmap:{G}"])
    out = Path(args.out) if args.out else HERE / "results" / f"bench_grid_{backend}{'_quick' if args.quick else ''}.md"
    devs = jax.devices()
    lines = [
        f"# {G} ARTM models in one compiled call vs {G} sequential fits ({backend})",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in ['python', os.path.relpath(sys.argv[0])] + (argv if argv is not None else sys.argv[1:]))}`",
        "",
        f"Machine: {machine()}.  JAX devices: {', '.join(d.device_kind for d in devs)}.  "
        f"Load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        f"Models: ARTM with Φ smoothing + Θ sparsing, a {G}-point τ grid, {args.iterations} iterations each. "
        "Throughput = model-iterations per second (compile excluded; the grid's first, compiling call is "
        "listed apart).  Columns: `fit_many` in the batch driver's modes (`vmap:b`: b models side by "
        f"side).  E-step threads: {threads}.",
        "",
        "| corpus | T | one pass (ms) | sequential fits (s) | " + " | ".join(f"{m} (s) [first call]" for m in modes)
        + " | " + " | ".join(f"{m} ÷ sequential fits throughput" for m in modes) + " |",
        "|" + "---|" * (4 + 2 * len(modes)),
    ]
    for cname in args.corpus:
        corpus = load_corpus(cname, args.quick)
        train = corpus
        for T in args.topics:
            taus = grid_taus(G)
            one = pass_time(train, T, args.rounds)
            seq, seq_warm, seq_models = run_sequential(train, T, taus, args.iterations)
            print(f"{cname} T={T}: one pass {one * 1e3:.1f} ms; sequential {G} fits {seq:.2f} s "
                  f"(first fit, compiling: {seq_warm:.2f} s)", flush=True)
            cells, ratios = [], []
            for b in modes:
                t, first, models = run_grid(train, T, taus, args.iterations, b)
                # the batch must be the same models as the sequential fits
                diff = max(float(np.abs(m.phi_ - s.phi_).max()) for m, s in zip(models, seq_models))
                if diff > 1e-3:
                    raise AssertionError(f"fit_many {b} differs from the sequential fits by {diff}")
                cells.append(f"{t:.2f} [{first:.2f}]")
                ratios.append(f"{seq / t:.2f}")
                print(f"  fit_many {b}: {t:.2f} s (first call {first:.2f} s); throughput ratio {seq / t:.2f}; "
                      f"max |ΔΦ| vs sequential {diff:.1e}", flush=True)
            lines.append(f"| {cname} | {T} | {one * 1e3:.1f} | {seq:.2f} | " + " | ".join(cells) + " | "
                         + " | ".join(ratios) + " |")
    lines += ["", f"Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
