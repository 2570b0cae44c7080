"""A new interpreter to a fitted model (issue 42, item 4): topicjax's PLSA (T = 50, 60 iterations)
and LDA by Gibbs sampling (``LIDA(50, variant="lda")``, 200 sweeps) on KOS, each run a fresh
``python`` process, first with an empty persistent compilation cache (the first process a user
starts) and then with the cache the first one left (every later process); against the peers doing
their nearest job, one new process each: scikit-learn's batch ``LatentDirichletAllocation``
(10 iterations), tomotopy's ``LDAModel`` (200 Gibbs iterations, 2 workers) and gensim's
``LdaModel`` (5 passes), all with the same number of topics (``--topics``, default 50).

Each child process reports its phases, timed inside it from its first line:

* ``import``: topicjax: ``import topicjax`` (the package loads its families at their first use);
  a peer: NumPy and the library's module its user imports (``sklearn.decomposition``,
  ``tomotopy``, ``gensim.models``);
* ``load models`` (topicjax only): ``tj.PLSA`` / ``tj.LIDA`` and ``tj.Corpus``, which load JAX,
  SciPy, scikit-learn and the engine (and turn on the cache: :mod:`topicjax.core.jit_cache`);
* ``read``: topicjax: ``Corpus.from_uci``; a peer: one plain NumPy reader of the same UCI files
  (:func:`read_uci`), then the library's input built from it (scikit-learn: a SciPy CSR matrix;
  tomotopy: each document as its list of word strings; gensim: bag-of-words lists and an
  ``id2word`` dict), what its user would hold before the fit;
* ``fit``: topicjax: ``fit`` (tracing, compiling or loading from the cache, and the iterations);
  tomotopy: the model made, the documents added and ``train``; the others: ``fit`` / the
  ``LdaModel`` constructor;

the iterations the fit ran (``n_iter_``, tomotopy's ``global_step``, gensim's ``passes``) and, for
topicjax, the programs JAX compiled from scratch, loaded from the cache, and wrote to it (counted
with ``jax.monitoring``).  ``total`` is the process's wall time seen by this script, interpreter
start and exit included; ``cpu`` its CPU seconds (user + system, all its threads).  A peer that
is not installed is reported as absent (the peers are for comparison only, never dependencies of
topicjax); one that is installed but fails is reported as failed, with its error.

Printed: every run, then per system the medians over ``--repeats`` (topicjax: pairs of first and
second processes, each pair with a new empty cache folder; a peer: one process per repeat), the
ratios of the issue's targets (topicjax's ``second / first`` <= 0.5; our LDA's total / tomotopy's
<= 1; PLSA's total / scikit-learn's) and the median of ``--import-runs`` fresh processes that only
``import topicjax`` (target: <= 1.2 s).  ``--out`` writes all of it as JSON.

The children run as a user's would: ``JAX_COMPILATION_CACHE_DIR`` and JAX's cache thresholds are
removed from their environment (the test suite sets them), ``TOPICJAX_CACHE`` names the run's
folder.  Timings mean something only on a quiet machine: the 1-minute load is printed.

    python experiments/bench_coldstart.py                          # KOS, 3 repeats, every system
    python experiments/bench_coldstart.py --systems lda,tomotopy   # only these
    python experiments/bench_coldstart.py --quick                  # the bars corpus, T = 5, seconds
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import resource
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
#: the phases of a topicjax child
PHASES = ("import", "load models", "read", "fit")
#: the phases of a peer's child
PEER_PHASES = ("import", "read", "fit")
#: topicjax's systems: each runs as (first, second) process pairs sharing one cache folder
OURS = {"plsa": "topicjax PLSA", "lda": "topicjax LDA (Gibbs)"}
#: the peers: name -> (label, the module whose absence marks the peer absent)
PEERS = {"sklearn": ("scikit-learn batch LDA", "sklearn"), "tomotopy": ("tomotopy LDA (Gibbs)", "tomotopy"),
         "gensim": ("gensim LdaModel", "gensim")}
SYSTEMS = (*OURS, *PEERS)
DOCWORD = re.compile(r"^docword\.(.+)\.txt(\.gz)?$")


def read_uci(folder: str | Path):
    """The plain reader of the peers' children: ``(rows, vocab, D)`` of the UCI corpus in
    ``folder`` (``docword.NAME.txt[.gz]``, ``vocab.NAME.txt``): ``rows`` an ``(nnz, 3)`` int64 array
    of 0-based ``(doc, word, count)`` sorted by document, documents ``0 .. D - 1`` and words
    ``0 .. W - 1`` as in the header.  Raises ValueError naming the file when the folder holds no
    single corpus, the header disagrees with the lines or the vocabulary's length with ``W``, or
    an id or count is out of range."""
    import numpy as np

    folder = Path(folder)
    found = sorted(p for p in folder.iterdir() if DOCWORD.match(p.name)) if folder.is_dir() else []
    if len(found) != 1:
        raise ValueError(f"{folder}: expected one docword.NAME.txt[.gz] file, found {[p.name for p in found]}")
    docword = found[0]
    vocab_file = folder / f"vocab.{DOCWORD.match(docword.name).group(1)}.txt"
    with (gzip.open(docword, "rt") if docword.suffix == ".gz" else open(docword)) as fh:
        n_docs, n_words, nnz = (int(fh.readline()) for _ in range(3))
        rows = np.loadtxt(fh, dtype=np.int64, ndmin=2).reshape(-1, 3) - np.array([1, 1, 0])
    vocab = vocab_file.read_text().splitlines()[:n_words]
    if len(rows) != nnz or len(vocab) != n_words or rows.size and (
            rows[:, 0].min() < 0 or rows[:, 0].max() >= n_docs or rows[:, 1].min() < 0
            or rows[:, 1].max() >= n_words or rows[:, 2].min() < 1):
        raise ValueError(f"{docword}: header D = {n_docs}, W = {n_words}, NNZ = {nnz} against {len(rows)} lines "
                         f"and {len(vocab)} words in {vocab_file.name}, or an id or count out of range")
    return rows[np.argsort(rows[:, 0], kind="stable")], vocab, n_docs


def child_ours(system: str, corpus: str, a) -> dict:
    """topicjax's PLSA or LDA from a new interpreter; its phases and JAX's program counts."""
    t0 = time.perf_counter()
    import topicjax as tj

    t1 = time.perf_counter()
    Corpus = tj.Corpus
    if system == "plsa":
        Model, args = tj.PLSA, dict(n_components=a.topics, max_iter=a.iterations)
    else:
        Model, args = tj.LIDA, dict(n_components=a.topics, variant="lda", max_iter=a.sweeps)
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
    data = Corpus.from_uci(corpus)
    t3 = time.perf_counter()
    model = Model(**args, random_state=0, progress=False).fit(data)
    np.asarray(model.phi_)  # on the host: the fit is over
    t4 = time.perf_counter()
    counts["compiled"] -= counts["loaded"]
    return {"import": t1 - t0, "load models": t2 - t1 + (t2b - t2), "read": t3 - t2b, "fit": t4 - t3,
            "iterations": int(model.n_iter_), "topics": int(model.phi_.shape[1]), **counts}


def child_peer(system: str, corpus: str, a) -> dict:
    """A peer from a new interpreter: its phases, the iterations run and the topics fitted."""
    t0 = time.perf_counter()
    import numpy as np

    if system == "sklearn":
        import scipy.sparse
        from sklearn.decomposition import LatentDirichletAllocation
    elif system == "tomotopy":
        import tomotopy
    else:
        from gensim.models import LdaModel
    t1 = time.perf_counter()
    rows, vocab, n_docs = read_uci(corpus)
    if system == "sklearn":
        data = scipy.sparse.csr_matrix((rows[:, 2], (rows[:, 0], rows[:, 1])), shape=(n_docs, len(vocab)))
    elif system == "tomotopy":
        # rows sorted by document: one split of the repeated words at the documents' ends
        words = np.asarray(vocab, dtype=object)[np.repeat(rows[:, 1], rows[:, 2])]
        ends = np.cumsum(np.bincount(np.repeat(rows[:, 0], rows[:, 2]), minlength=n_docs))[:-1]
        data = [list(doc) for doc in np.split(words, ends) if len(doc)]
    else:
        bounds = np.flatnonzero(np.diff(rows[:, 0])) + 1
        data = [list(zip(part[:, 1].tolist(), part[:, 2].tolist())) for part in np.split(rows, bounds)]
        id2word = dict(enumerate(vocab))
    t2 = time.perf_counter()
    if system == "sklearn":
        model = LatentDirichletAllocation(n_components=a.topics, learning_method="batch",
                                          max_iter=a.sklearn_iterations, random_state=0).fit(data)
        iterations, topics = model.n_iter_, model.components_.shape[0]
    elif system == "tomotopy":
        model = tomotopy.LDAModel(k=a.topics, seed=0)
        for doc in data:  # tomotopy takes one document per call
            model.add_doc(doc)
        model.train(a.sweeps, workers=a.workers, show_progress=False)
        iterations, topics = model.global_step, model.k
    else:
        model = LdaModel(data, num_topics=a.topics, id2word=id2word, passes=a.passes, random_state=0)
        iterations, topics = model.passes, model.num_topics
    t3 = time.perf_counter()
    return {"import": t1 - t0, "read": t2 - t1, "fit": t3 - t2, "iterations": int(iterations), "topics": int(topics),
            "docs": n_docs}


def child_env(cache: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in JAX_CACHE_VARS}
    env["TOPICJAX_CACHE"] = str(cache) if cache is not None else "off"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def run_child(system: str, cache: Path | None, a) -> dict:
    """One child process of ``system``: its report plus ``total``, the wall time seen from here, and
    ``cpu``, the user + system CPU seconds of the process and its threads (less sensitive to a busy
    machine than ``total``, but threads that run at once add up).
    Raises RuntimeError with the child's output when it fails."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--corpus", a.corpus,
           "--topics", str(a.topics), "--iterations", str(a.iterations), "--sweeps", str(a.sweeps),
           "--sklearn-iterations", str(a.sklearn_iterations), "--passes", str(a.passes), "--workers", str(a.workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(cache), timeout=1800)
    total = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {system} child failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1][len("RESULT "):]), total=total, cpu=cpu)


def import_time() -> float:
    """``import topicjax`` in a fresh interpreter, timed inside it."""
    code = "import time; t = time.perf_counter(); import topicjax; print(time.perf_counter() - t)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(None),
                          check=True, timeout=600)
    return float(proc.stdout.split()[-1])


def medians(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}


def describe(label: str, res: dict) -> str:
    phases = PHASES if "load models" in res else PEER_PHASES
    text = (f"{label}: total {res['total']:.2f} s (CPU {res['cpu']:.2f} s) = "
            + ", ".join(f"{k} {res[k]:.2f}" for k in phases))
    text += f" (+ interpreter start/exit); {res['iterations']} iterations"
    if "compiled" in res:
        text += f"; programs compiled {res['compiled']}, loaded {res['loaded']}, written {res['written']}"
    return text


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=None, help="a UCI folder (default: KOS of the shared corpora; with --quick "
                                                  "the bars corpus, written to a temporary UCI folder)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, of {', '.join(SYSTEMS)} (default: all)")
    p.add_argument("--topics", type=int, default=50, help="topics of every system")
    p.add_argument("--iterations", type=int, default=60, help="topicjax PLSA's iterations")
    p.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps of topicjax's LDA and tomotopy")
    p.add_argument("--sklearn-iterations", type=int, default=10, help="scikit-learn's batch iterations")
    p.add_argument("--passes", type=int, default=5, help="gensim's passes")
    p.add_argument("--workers", type=int, default=2, help="tomotopy's workers")
    p.add_argument("--repeats", type=int, default=3, help="pairs of (empty cache, same cache) topicjax processes, "
                                                          "and processes of each peer")
    p.add_argument("--import-runs", type=int, default=5, help="fresh processes that only import topicjax")
    p.add_argument("--quick", action="store_true", help="the bars corpus (200 documents), T = 5, 5 iterations or "
                   "sweeps, 2 scikit-learn iterations, 1 gensim pass, one repeat, 3 imports")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    p.add_argument("--child", choices=SYSTEMS, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = [s for s in a.systems if s not in SYSTEMS]
    if unknown or not a.systems:
        p.error(f"--systems: unknown {unknown} (choose from {', '.join(SYSTEMS)})" if unknown else
                "--systems: name at least one system")
    for name in ("topics", "iterations", "sweeps", "sklearn_iterations", "passes", "workers", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    if a.import_runs < 0:
        p.error(f"--import-runs must be at least 0, got {a.import_runs}")
    if a.quick:
        a.topics, a.iterations, a.sweeps, a.sklearn_iterations, a.passes = 5, 5, 5, 2, 1
        a.repeats, a.import_runs = 1, 3
    return a


def bars_folder() -> Path:
    """The bars corpus of ``--quick`` (200 documents of 50 words) written as a UCI folder, so that
    every child reads it as it reads KOS."""
    sys.path.insert(0, str(ROOT))
    from topicjax.data.datasets import make_bars
    from topicjax.data.readers.uci import write_uci

    folder = Path(tempfile.mkdtemp(prefix="topicjax-coldstart-bars-"))
    write_uci(make_bars(200, doc_length=50, seed=0)[0], folder, "bars")
    return folder


def run_ours(system: str, a, repeat: int, entry: dict) -> None:
    cache = Path(tempfile.mkdtemp(prefix="topicjax-coldstart-"))
    try:
        for which in ("first", "second"):
            res = run_child(system, cache, a)
            entry["runs"][which].append(res)
            print(describe(f"{OURS[system]}, {which} process {repeat + 1}", res), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def run_peer(system: str, a, repeat: int, entry: dict) -> None:
    if entry["status"] != "ran":
        return
    try:
        res = run_child(system, None, a)
    except RuntimeError as err:  # installed but broken: reported, not fatal (a peer is only a comparison)
        entry.update(status="failed", error=str(err)[-3000:])
        print(f"{PEERS[system][0]}: failed\n{err}", flush=True)
        return
    entry["runs"].append(res)
    print(describe(f"{PEERS[system][0]}, process {repeat + 1}", res), flush=True)


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def main(argv=None) -> dict:
    a = parse(argv)
    if a.child:
        out = (child_ours if a.child in OURS else child_peer)(a.child, a.corpus, a)
        print("RESULT " + json.dumps(out), flush=True)
        return {}
    temp = bars_folder() if a.quick and a.corpus is None else None  # removed at the end
    if temp is not None:
        a.corpus = str(temp)
    elif a.corpus is None:
        sys.path.insert(0, str(ROOT))
        from topicjax.data.datasets import shared_data_dir

        a.corpus = str(shared_data_dir() / "kos")
    print(f"# cold start: {a.corpus}, T = {a.topics}; PLSA {a.iterations} iterations, Gibbs {a.sweeps} sweeps "
          f"(tomotopy {a.workers} workers), scikit-learn {a.sklearn_iterations} iterations, gensim {a.passes} passes; "
          f"1-minute load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    systems: dict[str, dict] = {}
    for s in a.systems:
        if s in OURS:
            systems[s] = {"label": OURS[s], "status": "ran", "runs": {"first": [], "second": []}}
        elif importlib.util.find_spec(PEERS[s][1]) is None:
            systems[s] = {"label": PEERS[s][0], "status": "absent"}
            print(f"{PEERS[s][0]}: absent ({PEERS[s][1]} is not installed)", flush=True)
        else:
            systems[s] = {"label": PEERS[s][0], "status": "ran", "runs": []}
    try:
        for r in range(a.repeats):  # the systems interleaved, so that a drift of the machine touches each alike
            for s, entry in systems.items():
                (run_ours if s in OURS else run_peer)(s, a, r, entry)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)

    totals = {}  # "plsa first", "lda second", "tomotopy", ...: median totals
    for s, entry in systems.items():
        if entry["status"] != "ran":
            continue
        if s in OURS:
            entry["median"] = {w: medians(rs) for w, rs in entry["runs"].items()}
            entry["ratio"] = entry["median"]["second"]["total"] / entry["median"]["first"]["total"]
            totals.update({f"{s} {w}": m["total"] for w, m in entry["median"].items()})
        else:
            entry["median"] = medians(entry["runs"])
            totals[s] = entry["median"]["total"]
    ratios = {  # name -> (value or None where a system did not run, target or None)
        "plsa second / first": (ratio(totals.get("plsa second"), totals.get("plsa first")), 0.5),
        "lda second / first": (ratio(totals.get("lda second"), totals.get("lda first")), 0.5),
        "lda first / tomotopy": (ratio(totals.get("lda first"), totals.get("tomotopy")), 1.0),
        "lda second / tomotopy": (ratio(totals.get("lda second"), totals.get("tomotopy")), 1.0),
        "plsa first / sklearn": (ratio(totals.get("plsa first"), totals.get("sklearn")), None),
        "plsa second / sklearn": (ratio(totals.get("plsa second"), totals.get("sklearn")), None),
    }
    imports = [import_time() for _ in range(a.import_runs)]

    print("\n| system | process | total s | CPU s | import | load models | read | fit | iterations | compiled | loaded "
          "| written |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cell = lambda m, k, f: format(m[k], f) if k in m else "-"  # noqa: E731
    for s, entry in systems.items():
        if entry["status"] != "ran":
            print(f"| {entry['label']} | {entry['status']} |" + " |" * 10)
            continue
        for w, m in (entry["median"].items() if s in OURS else [("new", entry["median"])]):
            print(f"| {entry['label']} | {w} | {m['total']:.2f} | {m['cpu']:.2f} | "
                  + " | ".join(cell(m, k, ".2f") for k in PHASES) + " | "
                  + " | ".join(cell(m, k, "g") for k in ("iterations", "compiled", "loaded", "written")) + " |")
    print()
    for name, (value, target) in ratios.items():
        if value is not None:
            print(f"{name} (median totals): {value:.2f}" + (f"  (target <= {target:g})" if target else ""))
    import_median = statistics.median(imports) if imports else None
    if imports:
        print(f"import topicjax: median {import_median:.3f} s of {len(imports)} fresh processes "
              f"({', '.join(f'{t:.3f}' for t in imports)}; target <= 1.2 s)")
    result = {"corpus": "bars" if temp is not None else a.corpus, "topics": a.topics, "iterations": a.iterations,
              "sweeps": a.sweeps, "sklearn_iterations": a.sklearn_iterations, "passes": a.passes,
              "workers": a.workers, "repeats": a.repeats, "systems": systems,
              "ratios": {k: {"value": v, "target": t} for k, (v, t) in ratios.items()},
              "import_s": imports, "import_median_s": import_median, "load": os.getloadavg()[0]}
    if a.out is not None:
        a.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
