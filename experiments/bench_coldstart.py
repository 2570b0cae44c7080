"""A new interpreter to a fitted model (issue 42, item 4): PLSA on KOS (T = 50, 60 iterations),
each run a fresh ``python`` process, first with an empty persistent compilation cache (the first
process a user starts) and then with the cache the first one left (every later process).

Each child process reports its phases, timed inside it from its first line:

* ``import``: ``import topicjax`` (the package loads its families at their first use);
* ``load models``: ``tj.PLSA`` and ``tj.Corpus``, which load JAX, SciPy, scikit-learn and the
  engine (and turn on the cache: :mod:`topicjax.core.jit_cache`);
* ``read``: the corpus read (``Corpus.from_uci``);
* ``fit``: ``PLSA(...).fit``: tracing, compiling or loading from the cache, and the iterations;

and the programs JAX compiled from scratch, loaded from the cache, and wrote to it (counted with
``jax.monitoring``).  ``total`` is the process's wall time seen by this script, interpreter start
and exit included.  Printed: every run, the medians over ``--repeats`` pairs (each pair with a new
empty cache folder), and ``second / first`` of the totals (the issue's target: <= 0.5), then the
median of ``--import-runs`` fresh processes that only ``import topicjax`` (target: <= 1.2 s).

The children run as a user's would: ``JAX_COMPILATION_CACHE_DIR`` and JAX's cache thresholds are
removed from their environment (the test suite sets them), ``TOPICJAX_CACHE`` names the run's
folder.  Timings mean something only on a quiet machine: the 1-minute load is printed.

    python experiments/bench_coldstart.py                     # KOS, 3 pairs
    python experiments/bench_coldstart.py --quick             # the bars corpus, T = 5, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: environment variables of JAX's own cache, removed from the children's environment
JAX_CACHE_VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                  "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "JAX_ENABLE_COMPILATION_CACHE")
PHASES = ("import", "load models", "read", "fit")


def child(corpus: str, topics: int, iterations: int) -> None:
    """One new interpreter to a fitted model; prints ``RESULT {json}``."""
    t0 = time.perf_counter()
    import topicjax as tj

    t1 = time.perf_counter()
    PLSA, Corpus = tj.PLSA, tj.Corpus
    t2 = time.perf_counter()
    import jax.monitoring
    import numpy as np

    counts = {"compiled": 0, "loaded": 0, "written": 0}

    def on_event(name, **_):
        if name == "/jax/compilation_cache/cache_hits":
            counts["loaded"] += 1
        elif name == "/jax/compilation_cache/cache_misses":  # JAX's name for an entry written
            counts["written"] += 1

    def on_duration(name, _secs, **_):
        if name == "/jax/core/compile/backend_compile_duration":  # recorded for a loaded one too
            counts["compiled"] += 1

    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    t2b = time.perf_counter()
    if corpus == "bars":
        data = tj.datasets.make_bars(200, doc_length=50, seed=0)[0]
    else:
        data = Corpus.from_uci(corpus)
    t3 = time.perf_counter()
    model = PLSA(n_components=topics, max_iter=iterations, random_state=0, progress=False).fit(data)
    np.asarray(model.phi_)  # on the host: the fit is over
    t4 = time.perf_counter()
    counts["compiled"] -= counts["loaded"]
    out = {"import": t1 - t0, "load models": t2 - t1 + (t2b - t2), "read": t3 - t2b, "fit": t4 - t3, **counts}
    print("RESULT " + json.dumps(out), flush=True)


def child_env(cache: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in JAX_CACHE_VARS}
    env["TOPICJAX_CACHE"] = str(cache) if cache is not None else "off"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def run_fit(cache: Path, a) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--corpus", a.corpus, "--topics", str(a.topics),
           "--iterations", str(a.iterations)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(cache), timeout=1800)
    total = time.perf_counter() - start
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the child failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1][len("RESULT "):]), total=total)


def import_time() -> float:
    """``import topicjax`` in a fresh interpreter, timed inside it."""
    code = "import time; t = time.perf_counter(); import topicjax; print(time.perf_counter() - t)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(None),
                          check=True, timeout=600)
    return float(proc.stdout.split()[-1])


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=None, help="a UCI folder (default: KOS of the shared corpora); 'bars' with "
                                                  "--quick")
    p.add_argument("--topics", type=int, default=50)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3, help="pairs of (empty cache, same cache) processes")
    p.add_argument("--import-runs", type=int, default=5, help="fresh processes that only import topicjax")
    p.add_argument("--quick", action="store_true", help="the bars corpus, T = 5, 5 iterations, one pair, 3 imports")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.corpus, a.topics, a.iterations, a.repeats, a.import_runs = "bars", 5, 5, 1, 3
    elif a.corpus is None and not a.child:
        sys.path.insert(0, str(ROOT))
        from topicjax.data.datasets import shared_data_dir

        a.corpus = str(shared_data_dir() / "kos")
    return a


def main(argv=None) -> dict:
    a = parse(argv)
    if a.child:
        child(a.corpus, a.topics, a.iterations)
        return {}
    print(f"# cold start: {a.corpus}, PLSA T = {a.topics}, {a.iterations} iterations; "
          f"1-minute load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    runs = {"first": [], "second": []}
    for r in range(a.repeats):
        cache = Path(tempfile.mkdtemp(prefix="topicjax-coldstart-"))
        try:
            for which in ("first", "second"):
                res = run_fit(cache, a)
                runs[which].append(res)
                print(f"{which:>6} process {r + 1}: total {res['total']:.2f} s = "
                      + ", ".join(f"{k} {res[k]:.2f}" for k in PHASES)
                      + f" (+ interpreter start/exit); programs compiled {res['compiled']}, loaded {res['loaded']}, "
                        f"written {res['written']}", flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    med = {w: {k: statistics.median(x[k] for x in rs) for k in (*PHASES, "total", "compiled", "loaded", "written")}
           for w, rs in runs.items()}
    ratio = med["second"]["total"] / med["first"]["total"]
    imports = [import_time() for _ in range(a.import_runs)]
    print("\n| process | total s | import | load models | read | fit | compiled | loaded | written |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w, m in med.items():
        print(f"| {w} | {m['total']:.2f} | " + " | ".join(f"{m[k]:.2f}" for k in PHASES)
              + f" | {m['compiled']:g} | {m['loaded']:g} | {m['written']:g} |")
    print(f"\nsecond / first (median totals): {ratio:.2f}  (target <= 0.5)")
    print(f"import topicjax: median {statistics.median(imports):.3f} s of {len(imports)} fresh processes "
          f"({', '.join(f'{t:.3f}' for t in imports)}; target <= 1.2 s)")
    result = {"corpus": a.corpus, "topics": a.topics, "iterations": a.iterations, "runs": runs, "median": med,
              "ratio": ratio, "import_s": imports, "load": os.getloadavg()[0]}
    if a.out is not None:
        a.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
