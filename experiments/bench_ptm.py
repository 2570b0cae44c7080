"""Time the full top-down PTM model-order sweep with the fused C++ kernels and with the XLA path.

The sweep is :func:`topicjax.ptm.select_order` (2014 sec. 6.5): M = m_max, m_max - step, ...,
m_min, each order refitted from the previous one, GEM to tolerance ``--tol`` or ``--max-iter``
iterations.  Issue 12's target is the 20 Newsgroups training split, M 100 -> 10 step 2, in at most
8 minutes on 2 cores.  Each backend runs in its own process (``TOPICJAX_ESTEP=ffi`` / ``xla``, the
same ``TOPICJAX_THREADS``), one after the other, so that they never share the CPU; per backend the
script reports wall and CPU seconds (compilation included, as a user waits for it), seconds per
order, the load average before and after, and the BIC of every order and the chosen M* so that the
two paths can be seen to fit the same models (they agree to float32 round-off, not bitwise).

    python experiments/bench_ptm.py                      # 20 Newsgroups, M 100 -> 10 step 2, ffi and xla
    python experiments/bench_ptm.py --backends ffi       # the fast path only
    python experiments/bench_ptm.py --threads 1          # one kernel thread
    python experiments/bench_ptm.py --quick              # synthetic bars corpus, seconds (a smoke test)

Timings are results only on a quiet machine (``uptime`` load < 1); the report prints the load.
Results go to ``experiments/results/bench_ptm.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    # the sweep's own script (it imports topicjax, which this parent process otherwise does not
    # need: the backends run in child processes with their own TOPICJAX_ESTEP)
    sys.path.insert(0, str(ROOT / "experiments"))
    from ptm_order_sweep import add_sweep_arguments

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="ffi,xla", help="comma-separated: ffi, xla")
    p.add_argument("--threads", type=int, default=None, help="kernel threads (default: all cores)")
    p.add_argument("--n-docs", type=int, default=None, help="random sample of the training documents")
    add_sweep_arguments(p)
    p.add_argument("--quick", action="store_true", help="synthetic bars corpus, M 8 -> 6, a few seconds per backend")
    p.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_ptm.md"))
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # internal: run one backend, print JSON
    args = p.parse_args(argv)
    if args.quick:
        args.m_max, args.m_min, args.step, args.max_iter, args.bic = 8, 6, 2, 5, "2014-exact"
    return args


def load_corpus(args):
    import topicjax as tj

    if args.quick:
        phi = 0.7 * tj.datasets.bars_topics(5)
        phi = phi + 0.3 / phi.shape[0]
        corpus, _, _ = tj.datasets.sample_lda_corpus(phi, 200, doc_length=60, alpha=0.2, seed=args.seed)
        return corpus
    return tj.datasets.load_20newsgroups("train", n_docs=args.n_docs, seed=args.seed)


def worker(args):
    """One backend's sweep in this process; prints one JSON line."""
    from topicjax import ptm
    from topicjax.core import kernels
    from topicjax.ptm import kernels as ptm_kernels

    corpus = load_corpus(args)
    if args.threads:
        kernels.set_threads(args.threads)
    used = ptm_kernels.backend_in_use()
    if used != args.worker:
        raise SystemExit(f"asked for the {args.worker!r} path but {used!r} would run (is the kernel built?)")
    per_order = []

    def on_order(M, model, secs):
        per_order.append({"M": M, "seconds": secs, "bic": float(model.bic_), "gem_iters": int(model.n_iter_)})

    load0 = os.getloadavg()
    w0, c0 = time.perf_counter(), time.process_time()
    res = ptm.select_order(corpus, args.m_max, args.m_min, args.step, bic=args.bic, random_state=args.seed,
                           progress=False, keep_models=False, callback=on_order, max_iter=args.max_iter, tol=args.tol)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"backend": used, "threads": kernels.get_threads() if used == "ffi" else 1, "wall": wall,
                      "cpu": cpu, "load_before": load0, "load_after": os.getloadavg(), "best_order": int(res.best_order),
                      "orders": per_order, "corpus": [corpus.n_docs, corpus.n_words, int(corpus.n_tokens)]}))


def run_backend(name, argv):
    env = dict(os.environ, TOPICJAX_ESTEP=name)
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--worker", name]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the {name} sweep failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(args, argv, runs):
    first = runs[0]
    D, W, N = first["corpus"]
    cmd = "python experiments/bench_ptm.py " + " ".join(shlex.quote(a) for a in argv)
    lines = [
        "# PTM model-order sweep: fused C++ kernels vs XLA",
        "",
        f"Command: `{cmd}`",
        "",
        f"Corpus: {'synthetic bars (--quick)' if args.quick else '20 Newsgroups train'}: {D} documents, {W} words, "
        f"{N} tokens.  Orders {args.m_max} -> {args.m_min} step {args.step}, BIC {args.bic}, GEM tol {args.tol}, "
        f"at most {args.max_iter} iterations per order, seed {args.seed}.",
        f"Machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}.  Backends run one after the other, each in its own process; wall time "
        "includes JIT compilation.  Timings are results only when the load before each run is below 1.",
        "",
        "| backend | threads | wall s | wall min | CPU s | load before (1/5/15 min) | load after | M* | GEM iterations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        its = sum(o["gem_iters"] for o in r["orders"])
        lines.append(f"| {r['backend']} | {r['threads']} | {r['wall']:.1f} | {r['wall'] / 60:.2f} | {r['cpu']:.1f} | "
                     f"{' '.join(f'{x:.2f}' for x in r['load_before'])} | "
                     f"{' '.join(f'{x:.2f}' for x in r['load_after'])} | {r['best_order']} | {its} |")
    by = {r["backend"]: r for r in runs}
    if "ffi" in by and "xla" in by:
        f, x = by["ffi"], by["xla"]
        lines += ["", f"Speed-up of the fused kernels: {x['wall'] / f['wall']:.2f}x wall "
                      f"(target: the 20NG sweep <= 8 min on 2 cores; ffi took {f['wall'] / 60:.2f} min)."]
        lines += ["", "| M | BIC ffi | BIC xla | rel. diff | s ffi | s xla | iters ffi | iters xla |", "|---|---|---|---|---|---|---|---|"]
        xo = {o["M"]: o for o in x["orders"]}
        for o in f["orders"]:
            q = xo.get(o["M"])
            if q is None:
                continue
            rel = abs(o["bic"] - q["bic"]) / max(abs(q["bic"]), 1e-30)
            lines.append(f"| {o['M']} | {o['bic']:.1f} | {q['bic']:.1f} | {rel:.1e} | {o['seconds']:.1f} | "
                         f"{q['seconds']:.1f} | {o['gem_iters']} | {q['gem_iters']} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    return text


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = [b for b in backends if b not in ("ffi", "xla")]
    if bad or not backends:
        raise SystemExit(f"--backends takes ffi and/or xla, got {args.backends!r}")
    print(f"command: python experiments/bench_ptm.py {' '.join(shlex.quote(a) for a in argv)}", flush=True)
    runs = []
    for b in backends:
        print(f"[{b}] load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        r = run_backend(b, argv)
        runs.append(r)
        print(f"[{b}] {r['wall']:.1f} s wall ({r['wall'] / 60:.2f} min), {r['cpu']:.1f} s CPU, threads {r['threads']}, "
              f"M* = {r['best_order']}; load after: {' '.join(f'{x:.2f}' for x in r['load_after'])}", flush=True)
    text = report(args, argv, runs)
    print(text)
    print(f"report: {args.out}")
    return runs


if __name__ == "__main__":
    main()
