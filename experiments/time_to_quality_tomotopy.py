"""Time to tomotopy's 1000-iteration hold-out perplexity ("speed and scale" target: at most 0.25x
tomotopy's time), every perplexity computed by one evaluation function of ours on one split.

The protocol, per corpus and number of topics T:

1. **One split.**  ``bench_em.split``: documents 90/10; the vocabulary restricted to the words of
   the training documents; the test documents' tokens halved (``Corpus.completion_split``, ARTM
   sec. 5).  Every Φ — tomotopy's and ours — is scored by ``bench_em.evaluate``: Φ mixed with the
   uniform distribution at weight 1e-9, Θ of the test documents folded in on the observed halves
   with Φ fixed (``metrics.fold_in`` / ``em.infer_theta``, 30 EM iterations), the held-out halves
   scored (``metrics.heldout_perplexity``).  Tomotopy's Θ is never used: only its topic-word
   distributions ``get_topic_word_dist`` (φ = (n_wk + η) / (n_k + W η)).

2. **tomotopy** ``LDAModel(k=T, seed)`` with its defaults (α = 0.1, η = 0.01, α re-estimated every
   ``optim_interval`` = 10 iterations), ``workers = --threads``, trained ``--tp-iters`` (1000)
   collapsed-Gibbs iterations in chunks of ``--tp-every``; after each chunk its Φ is evaluated
   with the clock stopped.  Its perplexity after the last iteration is the **target**; we also
   report the time tomotopy itself needed to first reach it (at checkpoint resolution).

3. **Ours**: ARTM with the two smoothing regularizers (``regularizers.smooth_phi`` and
   ``smooth_theta``, eq. 23-24: φ_wt ∝ n_wt + τ_φ, θ_td ∝ n_td + τ_θ — LDA-like, τ_φ and τ_θ
   playing β and α), run by one of two compiled steps of ``topicjax.artm.algorithm``:

   * ``offline-N``: ``em.step`` with ``EMConfig(doc_passes=N)`` (BigARTM's offline pass: Θ
     restarted from uniform, N - 1 Θ-only iterations with the smoothing, one full E-step);
   * ``carried``: ``em.step`` (Θ carried over; the step ``ARTM.fit`` runs, without the
     estimator's per-iteration host work: τ schedules, scores, history).

   The coefficients are traced arguments (one compilation per route).  The route and (τ_φ, τ_θ)
   are **chosen without the test documents**: the training documents are split again 90/10
   (``bench_em.split`` with seed + 1); tomotopy is trained ``--tp-iters`` iterations on the inner
   part and its validation perplexity, less a ``--margin`` (3%: a configuration that only touches
   the value is not robust — in a first KOS run without the margin, PLSA with Θ carried over
   touched it on validation at pass 11 but hovered around the test target for 500 passes), is the
   validation target.  Each grid point runs on the inner part until it reaches it or
   ``--select-fraction`` (0.25) x tomotopy's inner time; the fastest wins (passes x the route's
   median seconds per pass; ties to the lower perplexity), or the lowest perplexity if none
   reaches.  Stage 1 searches ``--betas`` x ``--alphas`` on the first of ``--routes``, stage 2
   tries the other routes at the chosen pair (``--full-grid``: every route with every pair).
   The winner is then trained on the full training part and evaluated on the test documents
   after every pass (clock stopped), until it reaches the target or ``--max-seconds`` (default:
   tomotopy's time).

Reported: tomotopy's target and time, its time to its own final value, our time to the target,
the ratio ours / tomotopy (the target is <= 0.25), and, if ours never reaches it, its best
perplexity, when, and the miss in percent.  Compilation (ours) and model construction
(tomotopy) are reported apart and not counted; nor is any evaluation.  The machine is shared:
load averages are recorded.  tomotopy is a comparison tool only (``pip install tomotopy``), never
a dependency of topicjax; without it the script stops with a message.

    JAX_PLATFORMS=cpu python experiments/time_to_quality_tomotopy.py --corpus kos --topics 100
    JAX_PLATFORMS=cpu python experiments/time_to_quality_tomotopy.py --corpus 20ng --topics 100
    JAX_PLATFORMS=cpu python experiments/time_to_quality_tomotopy.py --corpus /path/to/uci_folder
    JAX_PLATFORMS=cpu python experiments/time_to_quality_tomotopy.py --quick   # seconds, synthetic
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import shlex
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_em import Tomotopy, evaluate, load_corpus, machine, split  # noqa: E402


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def lscpu() -> str:
    """CPU model and core counts as ``lscpu`` reports them (falls back to /proc/cpuinfo)."""
    import subprocess

    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    keep = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)")
    fields = []
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in keep:
            fields.append(f"{k.strip()}: {v.strip()}")
    return "; ".join(fields) if fields else f"{os.cpu_count()} logical CPUs (lscpu unavailable)"


# ------------------------------------------------------------------------------------ tomotopy
def run_tomotopy(train, T, threads, seed, iters, every, observed, heldout, log=print):
    """tomotopy LDAModel for ``iters`` iterations; Φ evaluated every ``every`` (clock stopped).

    Returns ``{"setup": s, "trace": [(iteration, seconds, perplexity), ...]}``."""
    t0 = time.perf_counter()
    sys_ = Tomotopy(train, T, threads, seed)  # documents added, model initialised (train(0))
    setup = time.perf_counter() - t0
    model = sys_.model
    trace, spent, done = [], 0.0, 0
    while done < iters:
        n = min(every, iters - done)
        t0 = time.perf_counter()
        model.train(n, workers=threads)
        spent += time.perf_counter() - t0
        done += n
        ppl = evaluate(sys_.phi(), observed, heldout)
        trace.append((done, spent, ppl))
        log(f"  tomotopy it {done:5d}  {spent:8.2f} s  hold-out perplexity {ppl:.2f}")
    return {"setup": setup, "trace": trace, "alpha": float(np.mean(model.alpha)), "eta": float(model.eta)}


# ------------------------------------------------------------------------------------ ours
class OursSmoothed:
    """ARTM with smooth_phi + smooth_theta (coefficients traced) on one training corpus.

    ``route`` is ``"offline-N"`` (``em.step`` with ``EMConfig(doc_passes=N)``) or ``"carried"``
    (``em.step``, Θ carried over).  Compiled steps are cached per (route, corpus shape)."""

    _compiled: dict = {}
    _data: dict = {}

    def __init__(self, train, T, route, seed):
        import jax
        import jax.numpy as jnp

        from topicjax import regularizers as regs
        from topicjax.artm import algorithm as em
        from topicjax.core import layout

        self.jax, self.jnp, self.em = jax, jnp, em
        self.train, self.T, self.route, self.seed = train, T, route, seed
        if self._data.get("corpus") is not train:  # one device copy per training corpus
            self._data.clear()
            self._data.update(corpus=train, data=layout.prepare(train))
        self.data = self._data["data"]
        # eq. 13 with the two smoothing terms of eq. 23; the coefficients are traced leaves
        self.reg = regs.combine(regs.smooth_phi(), regs.smooth_theta()).bind(regs.Context.build(train, T)).cast(jnp.float32)
        if route == "carried":
            self.cfg = em.EMConfig(remove=False)
        elif route.startswith("offline-"):
            self.cfg = em.EMConfig(remove=False, doc_passes=int(route.split("-", 1)[1]))
        else:
            raise ValueError(f"unknown route {route!r} (carried or offline-N)")
        key = (route, train.n_words, train.n_docs, train.nnz, T)
        if key not in self._compiled:
            step = jax.jit(em.step, static_argnames=("cfg",))
            t0 = time.perf_counter()
            self.reset()
            jax.block_until_ready(step(self.state, self.data, self._coefs((0.0, 0.0)), None, cfg=self.cfg))
            self._compiled[key] = (step, time.perf_counter() - t0)
        self._step, self.compile_s = self._compiled[key]
        self.reset()

    def _coefs(self, taus):
        return self.reg.with_coefs([float(t) for t in taus])

    def reset(self):
        self.state = self.em.init(self.jax.random.key(self.seed), self.train.n_words, self.train.n_docs, self.T,
                                  reg=self.reg)

    def run(self, taus, observed, heldout, *, target=-np.inf, max_seconds=np.inf, max_passes=10_000, log=None,
            keep_going=False):
        """Train from a fresh start, evaluating after every pass (clock stopped) until the
        perplexity is <= ``target``, ``max_seconds`` of training or ``max_passes``.  With
        ``keep_going``, a run that reached the target at pass h goes on to pass max(2h, h + 20)
        (within the same limits), to show whether it stays below the target.
        Returns the trace ``[(pass, seconds, perplexity), ...]``."""
        self.reset()
        coefs = self._coefs(taus)
        trace, spent, stop = [], 0.0, None
        for i in range(1, max_passes + 1):
            t0 = time.perf_counter()
            self.state = self._step(self.state, self.data, coefs, None, cfg=self.cfg)
            self.jax.block_until_ready(self.state.phi)
            spent += time.perf_counter() - t0
            ppl = evaluate(np.asarray(self.state.phi), observed, heldout)
            trace.append((i, spent, ppl))
            if log:
                log(f"  ours {self.route} τ={taus}  pass {i:4d}  {spent:7.2f} s  perplexity {ppl:.2f}")
            if stop is None and ppl <= target:
                stop = max(2 * i, i + 20) if keep_going else i
            if (stop is not None and i >= stop) or spent >= max_seconds:
                break
        return trace


def first_reach(trace, target):
    for row in trace:
        if row[2] <= target:
            return row
    return None


# ------------------------------------------------------------------------------------ one setting
def one_setting(cname, corpus, T, args, lines, log=print):
    train, observed, heldout = split(corpus, args.seed)
    inner, v_obs, v_held = split(train, args.seed + 1)  # validation part for choosing the grid point
    lines += [f"## {cname}, T = {T}", "",
              f"Split (seed {args.seed}): {train.n_docs} training documents, {train.n_words} words, "
              f"{train.n_tokens} tokens; {observed.n_docs} test documents ({observed.n_tokens} observed + "
              f"{heldout.n_tokens} held-out tokens).  Validation for the grid (seed {args.seed + 1}): "
              f"{inner.n_docs} inner training documents, {v_obs.n_docs} validation documents.", ""]
    log(lines[-2])

    # --- tomotopy: the target
    lines.append(f"Load average before tomotopy: {_load()}.")
    tp = run_tomotopy(train, T, args.threads, args.seed, args.tp_iters, args.tp_every, observed, heldout, log)
    lines.append(f"Load average after tomotopy: {_load()}.")
    tp_iters, tp_time, target = tp["trace"][-1]
    own = first_reach(tp["trace"], target)

    # --- the choice of ours' configuration, without the test documents: tomotopy trained on the
    # inner part gives a validation target; every grid point runs until it reaches it (or the budget)
    lines.append(f"Load average before tomotopy on the inner part: {_load()}.")
    tpv = run_tomotopy(inner, T, args.threads, args.seed, args.tp_iters, args.tp_iters, v_obs, v_held, log)
    _, v_time, v_tomotopy = tpv["trace"][-1]
    v_target = v_tomotopy * (1 - args.margin)
    budget = args.select_seconds or args.select_fraction * v_time
    lines.append(f"Load average before the grid: {_load()}.")
    rows = []

    def try_config(route, b, a):
        m = OursSmoothed(inner, T, route, args.seed)
        tr = m.run((b, a), v_obs, v_held, target=v_target, max_seconds=budget, max_passes=args.max_passes)
        hit = first_reach(tr, v_target)
        rows.append({"route": route, "beta": b, "alpha": a, "reached": hit is not None, "passes": len(tr),
                     "seconds": tr[-1][1], "s_per_pass": tr[-1][1] / len(tr), "best": min(r[2] for r in tr),
                     "hit_ppl": hit[2] if hit else float("inf"), "compile": m.compile_s})
        log(f"  grid {route:10s} τ_φ={b:<6g} τ_θ={a:<6g} "
            + (f"reached {v_target:.2f} in {len(tr)} passes ({tr[-1][1]:.2f} s)" if hit else
               f"not reached in {tr[-1][1]:.1f} s ({len(tr)} passes); best {rows[-1]['best']:.2f}"))

    def select():
        # Time to the validation target = passes x the route's median seconds per pass (the cost of
        # a pass does not depend on the coefficients, so this is less noisy than each run's clock).
        per_pass = {r["route"]: float(np.median([q["s_per_pass"] for q in rows if q["route"] == r["route"]]))
                    for r in rows}
        for r in rows:
            r["est_seconds"] = r["passes"] * per_pass[r["route"]] if r["reached"] else float("inf")
        # ties (same passes and route) go to the lower perplexity at the pass that reached the target
        return min(rows, key=lambda r: (0, r["est_seconds"], r["hit_ppl"]) if r["reached"] else (1, r["best"], 0))

    for b in args.betas:  # stage 1: the coefficients, on the first route
        for a in args.alphas:
            try_config(args.routes[0], b, a)
    first = select()
    for route in args.routes[1:]:  # stage 2: the other routes at the chosen coefficients
        if args.full_grid:
            for b in args.betas:
                for a in args.alphas:
                    try_config(route, b, a)
        else:
            try_config(route, first["beta"], first["alpha"])
    chosen = select()
    lines.append(f"Load average after the grid: {_load()}.")

    # --- the chosen configuration on the real split
    lines.append(f"Load average before ours: {_load()}.")
    ours = OursSmoothed(train, T, chosen["route"], args.seed)
    max_s = args.max_seconds if args.max_seconds else tp_time
    trace = ours.run((chosen["beta"], chosen["alpha"]), observed, heldout, target=target, max_seconds=max_s,
                     max_passes=args.max_passes, log=log if args.verbose else None, keep_going=True)
    lines.append(f"Load average after ours: {_load()}.")
    hit = first_reach(trace, target)
    best = min(trace, key=lambda r: r[2])
    after = [r for r in trace if hit is not None and r[0] > hit[0]]

    cfg = (f"{chosen['route']}, τ_φ = {chosen['beta']:g}, τ_θ = {chosen['alpha']:g}")
    lines += ["", f"### Result: time to tomotopy's {tp_iters}-iteration hold-out perplexity {target:.2f}", "",
              "| system | configuration | iterations / passes | seconds | hold-out perplexity | ours / tomotopy | "
              "setup (not counted) |",
              "|---|---|---|---|---|---|---|",
              f"| tomotopy LDAModel | k = {T}, workers = {args.threads}, α = 0.1 (optimised every 10 it.; final "
              f"mean {tp['alpha']:.3g}), η = {tp['eta']:g} | {tp_iters} | {tp_time:.2f} | {target:.2f} | - | "
              f"{tp['setup']:.1f} s model build |"]
    if own is not None:
        lines.append(f"| tomotopy, first checkpoint at its own final value | (every {args.tp_every} it.) | "
                     f"{own[0]} | {own[1]:.2f} | {own[2]:.2f} | - | - |")
    if hit is not None:
        ratio = hit[1] / tp_time
        lines.append(f"| ours (reached) | {cfg} | {hit[0]} | {hit[1]:.2f} | {hit[2]:.2f} | **{ratio:.3f}** | "
                     f"{ours.compile_s:.1f} s compile |")
        verdict = (f"Ours reaches tomotopy's {tp_iters}-iteration perplexity in {hit[1]:.2f} s ({hit[0]} passes) "
                   f"against tomotopy's {tp_time:.2f} s: ratio {ratio:.3f} "
                   f"({'meets' if ratio <= 0.25 else 'misses'} the <= 0.25 target).")
        if after:
            below = sum(r[2] <= target for r in after)
            verdict += (f"  Continued to pass {after[-1][0]} ({after[-1][1]:.2f} s): {below} of the {len(after)} later "
                        f"passes at or below the target; best {best[2]:.2f} (pass {best[0]}), last {after[-1][2]:.2f}.")
    else:
        ratio = float("inf")
        miss = 100 * (best[2] / target - 1)
        lines.append(f"| ours (not reached) | {cfg} | {len(trace)} | {trace[-1][1]:.2f} | best {best[2]:.2f} "
                     f"(pass {best[0]}, {best[1]:.2f} s) | - | {ours.compile_s:.1f} s compile |")
        verdict = (f"Ours does NOT reach {target:.2f} within {trace[-1][1]:.2f} s ({len(trace)} passes): best "
                   f"{best[2]:.2f} at pass {best[0]} ({best[1]:.2f} s), {miss:.2f}% above the target.")
    lines += ["", verdict, ""]
    log(verdict)

    lines += [f"Choice of ours' configuration on the validation split (test documents unused): tomotopy trained "
              f"{args.tp_iters} iterations on the inner training part ({v_time:.2f} s) reaches validation perplexity "
              f"{v_tomotopy:.2f}; each grid point of ours runs until it reaches {v_target:.2f} (that value minus a "
              f"margin of {100 * args.margin:g}%, so that a configuration that barely touches it is not chosen) or "
              f"{budget:.1f} s = "
              f"{args.select_fraction:g} x that time); "
              + ("every route with every coefficient pair" if args.full_grid else
                 f"first the coefficients on {args.routes[0]}, then the other routes at the chosen coefficients")
              + "; the fastest wins (passes x the route's median s/pass), or, if "
              "none reaches, the lowest perplexity; ties go to the lower perplexity at the pass that reached the "
              "target.", "",
              "| route | τ_φ | τ_θ | reached | passes | s/pass | est. seconds to target | best validation perplexity "
              "| compile s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = " **(chosen)**" if r is chosen else ""
        lines.append(f"| {r['route']}{mark} | {r['beta']:g} | {r['alpha']:g} | {'yes' if r['reached'] else 'no'} | "
                     f"{r['passes']} | {r['s_per_pass']:.3f} | {r['est_seconds']:.2f} | {r['best']:.2f} | "
                     f"{r['compile']:.1f} |")
    lines.append("")

    keep = {0, len(tp["trace"]) - 1} | {i for i, r in enumerate(tp["trace"]) if r[0] % args.report_every == 0}
    lines += ["tomotopy trace (test hold-out perplexity):", "", "| iteration | seconds | perplexity |", "|---|---|---|"]
    lines += [f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} |" for i, r in enumerate(tp["trace"]) if i in keep]
    lines += ["", f"Ours trace ({cfg}; test hold-out perplexity):", "", "| pass | seconds | perplexity |",
              "|---|---|---|"]
    step = max(1, len(trace) // 25)
    lines += [f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} |" for i, r in enumerate(trace)
              if i % step == 0 or i == len(trace) - 1 or r is hit]
    lines.append("")
    return {"corpus": cname, "T": T, "target": target, "tp_time": tp_time, "tp_own": own, "ours": hit, "after": after,
            "best": best, "ratio": ratio, "config": cfg}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=["kos"],
                    help="kos, 20ng, bars, or a corpus path readable by Corpus.load (e.g. a UCI folder)")
    ap.add_argument("--topics", nargs="+", type=int, default=[100])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="tomotopy workers (XLA uses all cores)")
    ap.add_argument("--tp-iters", type=int, default=1000)
    ap.add_argument("--tp-every", type=int, default=25, help="tomotopy checkpoint interval (iterations)")
    ap.add_argument("--report-every", type=int, default=100, help="tomotopy rows shown in the trace table")
    ap.add_argument("--routes", nargs="+", default=["offline-5", "offline-3", "offline-10", "carried"],
                    help="offline-N (EMConfig(doc_passes=N)) or carried (Θ carried over); the first is used for the "
                         "coefficient grid, the others are tried at the chosen coefficients")
    ap.add_argument("--betas", nargs="+", type=float, default=[0.0, 0.01, 0.1, 0.5], help="τ of smooth_phi")
    ap.add_argument("--alphas", nargs="+", type=float, default=[0.0, 0.1, 0.5], help="τ of smooth_theta")
    ap.add_argument("--full-grid", action="store_true",
                    help="every route with every coefficient pair (default: the other routes at the pair chosen "
                         "on the first route only)")
    ap.add_argument("--margin", type=float, default=0.03,
                    help="grid points must reach tomotopy's validation perplexity minus this relative margin")
    ap.add_argument("--select-fraction", type=float, default=0.25,
                    help="grid budget per point as a fraction of tomotopy's time on the inner training part")
    ap.add_argument("--select-seconds", type=float, default=None, help="fixed grid budget (overrides the fraction)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="ours' budget on the test split (default: tomotopy's time)")
    ap.add_argument("--max-passes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="print every pass of ours")
    ap.add_argument("--quick", action="store_true", help="seconds-long smoke run on a synthetic corpus")
    ap.add_argument("--out", default=None)
    ap.add_argument("--append", action="store_true", help="append to --out (e.g. a second corpus run separately)")
    args = ap.parse_args(argv)
    command = "JAX_PLATFORMS=cpu python experiments/time_to_quality_tomotopy.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        args.corpus, args.topics = ["bars"], [10]
        args.tp_iters, args.tp_every, args.report_every = 40, 10, 20
        args.routes, args.betas, args.alphas = ["offline-5", "carried"], [0.0, 0.1], [0.1]
        args.max_passes, args.select_seconds = 30, 30.0  # passes, not seconds, bound the smoke run
    out = Path(args.out) if args.out else HERE / "results" / (
        "time_to_quality_tomotopy_quick.md" if args.quick else "time_to_quality_tomotopy.md")
    try:
        import tomotopy  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"tomotopy is not installed ({e}); it is needed for the target (pip install tomotopy)")

    lines = ["# Time to tomotopy's hold-out perplexity (speed and scale target: <= 0.25x tomotopy's time)", "",
             f"Command: `{command}`", "",
             f"Machine: {lscpu()}.  {machine()}.", "",
             f"Load average at start: {_load()} ("
             + ("quiet: below 1" if os.getloadavg()[0] < 1 else "a loaded machine: timings are noisy") + ").  "
             f"tomotopy workers = {args.threads}; XLA uses its own CPU thread pool over all cores.", ""]
    results = []
    for cname in args.corpus:
        t0 = time.perf_counter()
        corpus = load_corpus(cname, args.quick)
        print(f"{cname}: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        for T in args.topics:
            results.append(one_setting(cname, corpus, T, args, lines, log=lambda s: print(s, flush=True)))
    lines += ["## Summary", "",
              f"| corpus | T | tomotopy target ({args.tp_iters} it.) | tomotopy s | tomotopy s to own final | ours s | "
              "ours / tomotopy (<= 0.25) | ours' later passes below the target | ours' configuration |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        own = f"{r['tp_own'][1]:.2f} (it. {r['tp_own'][0]})" if r["tp_own"] else "-"
        if r["ours"] is not None:
            o, ratio = f"{r['ours'][1]:.2f} (pass {r['ours'][0]})", f"{r['ratio']:.3f}"
        else:
            o = f"not reached; best {r['best'][2]:.2f} at {r['best'][1]:.2f} s"
            ratio = f"- (misses by {100 * (r['best'][2] / r['target'] - 1):.2f}%)"
        later = (f"{sum(q[2] <= r['target'] for q in r['after'])} of {len(r['after'])} (best {r['best'][2]:.2f})"
                 if r["after"] else "-")
        lines.append(f"| {r['corpus']} | {r['T']} | {r['target']:.2f} | {r['tp_time']:.2f} | {own} | {o} | {ratio} | "
                     f"{later} | {r['config']} |")
    lines += ["", f"Load average at the end: {_load()}."]
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and out.exists():  # a later run (another corpus) below the earlier ones
        lines = [out.read_text(encoding="utf-8").rstrip("\n"), "", "---", ""] + lines[2:]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[-len(results) - 5:]))
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()
