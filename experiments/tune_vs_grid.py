"""Gradient tuning of three ARTM coefficients against grid search and random search (issue 14).

For each corpus (KOS, 20 Newsgroups; documents of at least 2 tokens) the documents are split
into training (70%), validation (15%) and test (15%) documents; validation and test documents are split again for document
completion (half of each document's tokens observed).  The model is ARTM with T topics and three
regularizers -- Φ smoothing, Θ sparsing and topic decorrelation -- fitted for ``--iterations``
EM iterations from one seed.  Two validation objectives (lower is better):

* ``perplexity``: the log-perplexity of the validation documents' held-out halves;
* ``perplexity+coherence``: that plus ``--coherence-weight`` times minus the smooth coherence
  (:func:`topicjax.tune.coherence_loss`, expected NPMI of the sharpened topics; NPMI counted in the
  training documents for validation, in the test documents for the test value).

Three searchers over the same box of coefficients (log scale):

* ``grid``: ``--grid`` values per coefficient (``--grid``³ fits), fitted through
  ``ARTM.fit_many`` in batches of ``--batch`` models, every model then scored on the
  validation objective; its time to its best value is its whole time (only the finished grid
  knows its best).  The fits are shared by the objectives (each batch is scored on every
  objective, then dropped); the time charged to an objective is the fitting time plus its own
  scoring time -- what a grid run for that objective alone costs;
* ``random``: as many fits at log-uniform random points of the box, in the same batches; its
  time to the grid's best value is the time of the first batch that holds a model at least as
  good;
* ``tune``: :func:`topicjax.tune.tune` from the centre of the box (``--steps`` Adam steps on
  the log coefficients, learning rate ``--lr`` decaying to 5% on a cosine, momentum ``--b1``;
  unrolled hypergradients; when ``--patience`` steps improved its best by less than
  ``--probe-tol`` of it, a probe: ``--probe`` log-spaced values of each coefficient over the
  box, the others at the best point, fitted in one batch, and the tuner continues from the
  probe's best if it is better), then one ordinary fit with the best coefficients; its time to
  the grid's best is the time of the first step (or probe) whose fit reaches it (compilation
  included, as for the grid).  The probe exists because of 20 Newsgroups: along decorrelation
  the validation perplexity has a ridge near τ = 4000 between two basins, the better one at the
  box's upper bound, and gradient steps from the centre stay in the low-τ basin (1.2e-5 nats
  worse than the grid's best: the lr 0.5 and 1.0 runs of the previous session).  Its settings
  (6 values, patience 2, tolerance 1e-4) were chosen on that 20NG run, so they are not
  independent of this benchmark.

The table gives, per corpus and objective: number of fits, total wall time, wall time to the
grid's best validation value (and the ratio to the grid's time; the target is <= 1/5), the best
validation value, the test value of the chosen coefficients, and the coefficients.  The plot
shows the best validation value found against wall time.  Timings need a quiet machine
(``uptime`` load < 1); the load is written with the table.

Example::

    JAX_PLATFORMS=cpu python experiments/tune_vs_grid.py                       # KOS and 20NG, 10^3 grid
    JAX_PLATFORMS=cpu python experiments/tune_vs_grid.py --small               # the same with a 6^3 grid
    JAX_PLATFORMS=cpu python experiments/tune_vs_grid.py --corpora kos --grid 10 --steps 60
    python experiments/tune_vs_grid.py --quick --out /tmp/tune_vs_grid.md      # seconds, bars corpus
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

NAMES = ("smooth_phi", "sparse_theta", "decorrelate")
OBJECTIVES = ("perplexity", "perplexity+coherence")
SMALL_GRID = 6


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kos", "20ng"], choices=["kos", "20ng", "bars"])
    p.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=OBJECTIVES)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--grid", type=int, default=10, help="values per coefficient (grid of grid^3 fits)")
    p.add_argument("--random", type=int, default=None, help="random-search fits (default: as many as the grid)")
    p.add_argument("--batch", type=int, default=32, help="models per fit_many call")
    p.add_argument("--steps", type=int, default=30, help="gradient steps of the tuner")
    p.add_argument("--lr", type=float, default=1.0, help="initial Adam learning rate on log coefficients "
                   "(cosine decay to 5%% of it over the steps)")
    p.add_argument("--b1", type=float, default=0.5, help="Adam's momentum (less than the usual 0.9: less overshoot)")
    p.add_argument("--probe", type=int, default=6, help="values per coefficient of the tuner's probe over the whole "
                   "box when it stalls (topicjax.tune.tune(probe=...); 0: gradient steps only)")
    p.add_argument("--patience", type=int, default=2, help="the tuner probes when its best value improved by less "
                   "than --probe-tol times its size over this many steps")
    p.add_argument("--probe-tol", type=float, default=1e-4)
    p.add_argument("--coherence-weight", type=float, default=1.0)
    p.add_argument("--ng-docs", type=int, default=None, help="20NG documents (default: all of 'train')")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true",
                   help=f"the same protocol with a grid of {SMALL_GRID} values per coefficient ({SMALL_GRID}^3 = "
                   f"{SMALL_GRID ** 3} grid fits and as many random ones) instead of 10 (about 10 minutes on 2 quiet "
                   "cores instead of about 35); a coarser grid finds a worse best value, an easier target")
    p.add_argument("--quick", action="store_true", help="tiny synthetic run (seconds): checks the script works")
    p.add_argument("--out", default=None, help="markdown table; the plot goes next to it as .png (default: "
                   "experiments/results/tune_vs_grid.md; tune_vs_grid_small.md with --small, tune_vs_grid_quick.md with --quick)")
    args = p.parse_args(argv)
    if args.small:
        args.grid = SMALL_GRID
    if args.quick:
        args.corpora, args.topics, args.iterations = ["bars"], 5, 6
        args.grid, args.steps, args.batch = 2, 3, 8
        if "--objectives" not in (argv or sys.argv[1:]):
            args.objectives = ["perplexity+coherence"]
    if args.out is None:
        name = "tune_vs_grid_quick.md" if args.quick else "tune_vs_grid_small.md" if args.small else "tune_vs_grid.md"
        args.out = str(HERE / "results" / name)
    if args.random is None:
        args.random = args.grid ** 3
    return args


# ----------------------------------------------------------------------------- data
def load(name, args):
    import topicjax as tj

    if name == "bars":
        corpus, _, _ = tj.datasets.make_bars(n_docs=150, seed=args.seed)
    elif name == "kos":
        corpus = tj.datasets.load_kos()
    else:
        corpus = tj.datasets.load_20newsgroups("train", n_docs=args.ng_docs, seed=args.seed)
    # document completion needs at least 2 tokens per document (a few 20NG posts have 1)
    corpus = corpus.subset(np.flatnonzero(corpus.doc_lengths >= 2))
    rest, test = corpus.train_test_split(0.15, seed=args.seed)
    train, valid = rest.train_test_split(round(0.15 * corpus.n_docs), seed=args.seed + 1)
    return train, valid, test


def box(train, T):
    """The search box: τ of smoothing (added to n_wt, whose mean is n/(T W)), of sparsing
    (subtracted from n_td, mean n_d/T) and of decorrelation (τ φ_wt Σ_s φ_ws against
    n_wt ≈ n φ_wt / T, with Σ_s φ_ws ≈ T p(w): a share τ T² p(w) / n of the counts of word w,
    so τ = 10 n/T² takes up to 10 p(w) of them, a tenth for a word of 1% of the tokens)."""
    scale = train.n_tokens / T ** 2
    return {"smooth_phi": (1e-3, 10.0), "sparse_theta": (1e-3, 3.0), "decorrelate": (1e-2 * scale, 1e1 * scale)}


def objectives(kind, train, valid, test, weight):
    from topicjax.tune import coherence_loss, heldout_perplexity_loss

    val = heldout_perplexity_loss(*valid.completion_split(seed=1))
    tst = heldout_perplexity_loss(*test.completion_split(seed=2))
    if kind == "perplexity+coherence":
        val = val + weight * coherence_loss(train)
        tst = tst + weight * coherence_loss(test)
    return val, tst


def base_model(T, iterations, seed):
    import topicjax as tj
    from topicjax import regularizers as R

    regs = [(R.smooth_phi(), 0.1), (R.sparse_theta(), 0.1), (R.decorrelate(), 1.0)]
    return tj.ARTM(T, regularizers=regs, max_iter=iterations, random_state=seed, scores=(), progress=False)


# ----------------------------------------------------------------------------- searchers
def _objective_value(objective, phi, theta):
    return objective(phi, theta)[0]


_SCORE = []


def score_models(models, objective):
    """Objective values of fitted models (compiled once per objective structure and shapes)."""
    import jax
    import jax.numpy as jnp

    if not _SCORE:
        _SCORE.append(jax.jit(_objective_value))
    f = _SCORE[0]
    return [float(f(objective, jnp.asarray(m.phi_, jnp.float32), jnp.asarray(m.theta_, jnp.float32))) for m in models]


def fit_batch(base, train, chunk):
    """``fit_many`` of a batch; a model whose fit collapses (ARTM Notes 1-2: every topic or
    document removed) makes ``fit_many`` raise, so that batch is fitted model by model and a
    collapsed model counts as ``None`` (an infinitely bad value)."""
    from topicjax.core.errors import NumericalError

    try:
        return base.fit_many(train, taus=chunk)
    except NumericalError:
        out = []
        for point in chunk:
            try:
                out.append(base.fit_many(train, taus=point[None])[0])
            except NumericalError:
                out.append(None)
        return out


def _scores_with_gaps(models, objective):
    """Objective values of a batch, ``inf`` for collapsed fits."""
    ok = [m for m in models if m is not None]
    vals = iter(score_models(ok, objective))
    return [next(vals) if m is not None else np.inf for m in models]


def batched_search(base, train, points, objectives, batch):
    """Fit ``points`` (G x 3) in fit_many batches, once for all objectives: after each batch
    every objective ``(validation, test)`` scores the batch's models and keeps its best.  A
    searcher run for one objective alone would fit the same models and score them once, so the
    time charged to objective k is the fitting time plus objective k's own scoring time (the
    models are dropped after each batch: memory stays one batch).  Returns, per objective, the
    trace (elapsed, best so far, fits) and the best model's validation and test values and
    coefficients."""
    fit_time, trace = 0.0, [[] for _ in objectives]
    score_time = [0.0] * len(objectives)
    best = [(np.inf, None, None) for _ in objectives]
    for s in range(0, len(points), batch):
        chunk = points[s:s + batch]
        t0 = time.perf_counter()
        models = fit_batch(base, train, chunk)
        fit_time += time.perf_counter() - t0
        for i, (val_obj, _) in enumerate(objectives):
            t0 = time.perf_counter()
            vals = _scores_with_gaps(models, val_obj)
            k = int(np.argmin(vals))
            if vals[k] < best[i][0]:
                best[i] = (vals[k], models[k], chunk[k])
            score_time[i] += time.perf_counter() - t0
            trace[i].append((fit_time + score_time[i], best[i][0], s + len(chunk)))
    out = []
    for i, (_, tst_obj) in enumerate(objectives):
        value, model, coefs = best[i]
        test = score_models([model], tst_obj)[0]
        out.append({"trace": trace[i], "time": trace[i][-1][0], "fits": len(points), "value": value, "test": test,
                    "coefs": dict(zip(NAMES, map(float, coefs)))})
    return out


def run_tuner(base, train, bx, val_obj, tst_obj, args):
    import optax

    from topicjax.tune import tune

    centre = {k: float(np.sqrt(lo * hi)) for k, (lo, hi) in bx.items()}
    t0 = time.perf_counter()
    opt = optax.adam(optax.cosine_decay_schedule(args.lr, args.steps, alpha=0.05), b1=args.b1)
    result = tune(base, train, val_obj, bx, optimizer=opt, n_steps=args.steps, init=centre, progress=True, refit=True,
                  probe=args.probe, patience=args.patience, probe_tol=args.probe_tol)
    total = time.perf_counter() - t0
    elapsed, trace, fits = 0.0, [], 0
    for rec in result.history:
        elapsed += rec["seconds"]
        fits += 1 + rec.get("probe_fits", 0)
        trace.append((elapsed, rec["best"], fits))
    test = score_models([result.model], tst_obj)[0]
    return {"trace": trace, "time": total, "fits": fits + 1, "value": result.best_value, "test": test,
            "coefs": result.coefs}


def time_to(trace, target):
    for elapsed, best, _ in trace:
        if best <= target:
            return elapsed
    return None


# ----------------------------------------------------------------------------- report
def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def write_report(rows, traces, args, argv, load_start, out: Path):
    import jax

    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = "python experiments/tune_vs_grid.py" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv))
    lines = [
        "# Gradient tuning vs grid and random search (issue 14)", "",
        f"Command: `{cmd}`", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, Python "
        f"{platform.python_version()}; jax {jax.__version__} ({jax.default_backend()}).  "
        f"Load average at start: {load_start}; at end: {load_average()}.", "",
        f"Model: ARTM, T = {args.topics}, {args.iterations} iterations, seed {args.seed}; tuned: Φ smoothing, Θ "
        f"sparsing, decorrelation (log scale).  Grid: {args.grid}³ = {args.grid ** 3} fits (fit_many, batches of "
        f"{args.batch}); random: {args.random} fits; tune: {args.steps} Adam steps (lr {args.lr} cosine-decayed, b1 "
        f"{args.b1}) from the box centre"
        + (f", probing {args.probe} values of each coefficient when {args.patience} steps improved its best by less "
           f"than {args.probe_tol:g} of it" if args.probe else "")
        + " + 1 refit (fits: gradient steps + probe fits + refit).  Values: validation / test objective (lower is "
        "better).  'to grid best': wall time until the searcher's best validation value is <= the grid's best.", "",
        "| corpus | objective | searcher | fits | time (s) | to grid best (s) | ÷ grid time | best valid | test | "
        "smooth_phi | sparse_theta | decorrelate |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tt = "not reached" if r["to_grid"] is None else f"{r['to_grid']:.1f}"
        ratio = "" if r["to_grid"] is None else f"{r['to_grid'] / r['grid_time']:.3f}"
        c = r["coefs"]
        lines.append(f"| {r['corpus']} | {r['objective']} | {r['searcher']} | {r['fits']} | {r['time']:.1f} | {tt} | "
                     f"{ratio} | {r['value']:.5f} | {r['test']:.5f} | {c['smooth_phi']:.4g} | "
                     f"{c['sparse_theta']:.4g} | {c['decorrelate']:.4g} |")
    lines += ["", f"Plot: `{out.with_suffix('.png').name}` (best validation value found against wall time).", ""]
    out.write_text("\n".join(lines), encoding="utf-8")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(k[0], k[1]) for k in traces})
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.8), squeeze=False)
    for ax, (corpus, obj) in zip(axes[0], keys):
        for searcher, style in (("grid", "s-"), ("random", ".-"), ("tune", "o-")):
            tr = traces.get((corpus, obj, searcher))
            if tr:
                ax.plot([t for t, _, _ in tr], [b for _, b, _ in tr], style, label=searcher, ms=3)
        grid = traces.get((corpus, obj, "grid"))
        if grid:
            ax.axhline(grid[-1][1], color="0.6", ls="--", lw=1, label="grid's best")
        ax.set_xscale("log")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("best validation objective")
        ax.set_title(f"{corpus}: {obj}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    load_start = load_average()
    rows, traces = [], {}
    rng = np.random.default_rng(args.seed)
    for corpus_name in args.corpora:
        train, valid, test = load(corpus_name, args)
        bx = box(train, args.topics)
        base = base_model(args.topics, args.iterations, args.seed)
        axes = [np.geomspace(*bx[k], args.grid) for k in NAMES]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
        lo, hi = np.log([bx[k][0] for k in NAMES]), np.log([bx[k][1] for k in NAMES])
        random_points = np.exp(lo + (hi - lo) * rng.random((args.random, 3)))
        objs = [objectives(kind, train, valid, test, args.coherence_weight) for kind in args.objectives]
        print(f"{corpus_name}: grid of {len(grid)} fits, scored on {', '.join(args.objectives)}", flush=True)
        res = {kind: {} for kind in args.objectives}
        for searcher, points in (("grid", grid), ("random", random_points)):
            for kind, r in zip(args.objectives, batched_search(base, train, points, objs, args.batch)):
                res[kind][searcher] = r
                print(f"  {searcher} / {kind}: {r['time']:.1f} s, best {r['value']:.5f}", flush=True)
        for kind, (val_obj, tst_obj) in zip(args.objectives, objs):
            res[kind]["tune"] = run_tuner(base, train, bx, val_obj, tst_obj, args)
            print(f"  tune / {kind}: {res[kind]['tune']['time']:.1f} s, best {res[kind]['tune']['value']:.5f}",
                  flush=True)
            target = res[kind]["grid"]["value"]
            for searcher, r in res[kind].items():
                to = r["time"] if searcher == "grid" else time_to(r["trace"], target)
                rows.append({"corpus": corpus_name, "objective": kind, "searcher": searcher, "fits": r["fits"],
                             "time": r["time"], "to_grid": to, "grid_time": res[kind]["grid"]["time"],
                             "value": r["value"], "test": r["test"], "coefs": r["coefs"]})
                traces[(corpus_name, kind, searcher)] = r["trace"]
    write_report(rows, traces, args, list(sys.argv[1:] if argv is None else argv), load_start, Path(args.out))
    print(Path(args.out).read_text(encoding="utf-8"))
    return rows


if __name__ == "__main__":
    main()
