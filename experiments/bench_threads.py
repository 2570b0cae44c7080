"""Per-pass speed and thread scaling of the fused CPU E-step (issue 12) against the fused numba
reference, BigARTM, gensim, scikit-learn and tomotopy, in one process, on the same corpus split.

Systems (``--systems``; a missing package is reported, not fatal):

* ``ours-ffi``: one jit-compiled PLSA EM iteration (``topicjax.artm.algorithm.make_step``) whose E-step
  is the C++ kernel of ``topicjax.core.kernels``, at 1 thread and at ``--threads`` threads (the
  thread count is a runtime setting: one compiled step, switched between passes, untimed);
* ``ours-xla``: the same step with the pure-JAX E-step (``TOPICJAX_ESTEP=xla``), for reference;
* ``numba``: the fused reference of ``experiments/numba_reference.py`` (E-step and in-place
  M-step), at 1 and ``--threads`` threads, from the same initial Φ, Θ as ours;
* ``bigartm-1`` / ``bigartm-10``: BigARTM's ``fit_offline`` pass with num_document_passes 1 and
  10, ``num_processors`` 1 and ``--threads``;
* ``gensim`` (one ``LdaModel.update``, single process), ``sklearn`` (one batch variational EM
  iteration, ``n_jobs = --threads``), ``tomotopy`` (one Gibbs sweep, ``workers = --threads``):
  other algorithms, for orientation.

Passes are timed round-robin (``--rounds`` rounds; in each, every system in turn runs one untimed
pass and ``--per-turn`` timed ones; medians), so that the load of a shared machine hits all
systems alike.  "k threads" means k cores: before a
system's pass the whole process -- every thread, XLA's own pool and the libraries' workers
included -- is restricted to the first k usable cores (``--no-pin`` turns this off), so that a
one-thread figure cannot borrow a second core for the work around the kernel (our step's XLA
operations, which run on XLA's pool, could otherwise overlap the kernel on the idle core); the load average is printed at the start
of every table.  Besides the pass table: the E-step alone (our kernel against numba's at equal
threads) and the M-step alone (the XLA operations that follow our kernel in a pass, on that
E-step's counts: what of a pass the kernel's threads do not speed up), the thread-scaling table
(time at 1 thread / time at N threads, for us, numba and BigARTM), and the ratios issue 12 sets
targets for (ours / numba at equal threads <= 1.3, ours / BigARTM dp=1 <= 0.15, scaling at 2
threads >= 1.8).  The system classes are those of
``experiments/bench_em.py``.  Timings are results only on a quiet machine (``uptime`` load < 1).

Example::

    JAX_PLATFORMS=cpu python experiments/bench_threads.py --corpus kos 20ng --topics 50 100 200
    JAX_PLATFORMS=cpu python experiments/bench_threads.py --quick      # a seconds-long smoke run
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_em  # noqa: E402  (the shared system classes, corpus loading and split)

ALL_SYSTEMS = ("ours-ffi", "ours-xla", "numba", "bigartm-1", "bigartm-10", "gensim", "sklearn", "tomotopy")


_CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
_PIN = {"on": True}


def pin(n: int) -> None:
    """Restrict every thread of this process to the first ``n`` usable cores (threads started
    later inherit it from their creator); a no-op where affinity cannot be set or with --no-pin."""
    if not _PIN["on"] or not _CORES:
        return
    cores = set(_CORES[: max(1, n)])
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:  # a thread that ended meanwhile
            pass


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class OursCompiled(bench_em.Ours):
    """``ours`` compiled ahead of time under one E-step backend; ``before()`` sets the kernel's
    threads.  (An AOT-compiled step keeps its backend when the setting changes afterwards.)"""

    def __init__(self, train, T, threads, seed, backend="auto"):
        import jax

        from topicjax.artm import algorithm as em
        from topicjax.core import kernels, layout

        bench_em.System.__init__(self, train, T, threads, seed)
        self.jax, self.em, self.kernels = jax, em, kernels
        self.name = "ours-xla" if backend == "xla" else f"ours-ffi-{threads}"
        self.data = layout.prepare(train)
        t0 = time.perf_counter()
        self.reset()
        with kernels.backend(backend):
            self._step = jax.jit(em.make_step(jit=False)).lower(self.state, self.data, None).compile()
        self.before()
        jax.block_until_ready(self._step(self.state, self.data, None))
        self.compile_s = time.perf_counter() - t0

    def before(self):
        self.kernels.set_threads(self.threads)


def make_systems(names, train, T, counts, seed, workdir):
    """Every requested system at every thread count in ``counts`` (1 and N) where it has one."""
    from topicjax.core import kernels

    made, missing = [], {}
    init = None
    for name in names:
        try:
            if name == "ours-ffi":
                if not kernels.available():
                    raise ImportError(f"the C++ E-step is not built: {kernels.load_error()}")
                for n in counts:
                    made.append(OursCompiled(train, T, n, seed))
                init = made[-1].init_arrays()
            elif name == "ours-xla":
                made.append(OursCompiled(train, T, counts[-1], seed, backend="xla"))
                init = init or made[-1].init_arrays()
            elif name == "numba":
                if init is None:
                    init = OursCompiled(train, T, 1, seed, backend="xla").init_arrays()
                for n in counts:
                    s = bench_em.Numba(train, T, n, seed, init=init)
                    s.name = f"numba-{n}"
                    made.append(s)
            elif name.startswith("bigartm-"):
                for n in counts:
                    s = bench_em.BigARTM(train, T, n, seed, doc_passes=int(name.split("-")[1]), workdir=workdir)
                    s.name = f"{name}-{n}"
                    made.append(s)
            elif name in ("gensim", "sklearn", "tomotopy"):
                cls = {"gensim": bench_em.Gensim, "sklearn": bench_em.Sklearn, "tomotopy": bench_em.Tomotopy}[name]
                s = cls(train, T, counts[-1], seed)
                s.name = name if name == "gensim" else f"{name}-{counts[-1]}"
                made.append(s)
            else:
                raise ValueError(f"unknown system {name!r} (choose from {', '.join(ALL_SYSTEMS)})")
        except ImportError as e:
            missing[name] = f"not installed ({e})"
    return made, missing


def time_round_robin(systems, rounds, per_turn: int = 3):
    """Median and minimum seconds per pass (:func:`round_robin`): a system's turn sets its cores
    (:func:`pin`) and threads (``before()``), then runs one untimed pass (a switch of threads and
    cores leaves the caches of the other core cold; a fit runs its passes back to back)."""
    runs = {s.name: (lambda s=s: (pin(s.threads), getattr(s, "before", lambda: None)()), s.step) for s in systems}
    return round_robin(runs, rounds, per_turn, stat=lambda v: (statistics.median(v), min(v)))


def compile_pass_parts(phi, theta, data):
    """``(e, m)``: the two parts of a PLSA pass compiled apart, for timing each alone.
    ``e(phi, theta, data) -> (n_phi, n_theta)`` is the E-step (the backend selected now), and
    ``m(phi, theta, n_phi, n_theta) -> (phi, theta)`` the M-step on those counts (eq. 15-16,
    XLA's operations): what of a pass the kernel's threads do not speed up."""
    import jax

    from topicjax.core import estep, mstep

    e = jax.jit(lambda p, t, d: estep.expected_counts(p, t, d)[1:3]).lower(phi, theta, data).compile()
    n_phi, n_theta = e(phi, theta, data)
    m = jax.jit(lambda p, t, a, b: mstep.m_step(mstep.counts_likelihood(a, b), p, t)[2:4]).lower(
        phi, theta, n_phi, n_theta).compile()
    return e, m


def round_robin(runs: dict, rounds: int, per_turn: int, stat=statistics.median) -> dict:
    """``{name: stat(seconds)}`` (default the median) of ``runs = {name: (before, run)}``: each
    round gives every run a turn (``before()``, one untimed call, ``per_turn`` timed calls), so
    that slow drifts of the machine touch every run alike; the process is unpinned at the end."""
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, (before, run) in runs.items():
            before()
            run()
            for _ in range(per_turn):
                t0 = time.perf_counter()
                run()
                times[k].append(time.perf_counter() - t0)
    pin(len(_CORES))
    return {k: stat(v) for k, v in times.items()}


def estep_times(train, T, counts, rounds, with_numba, per_turn: int = 3):
    """The E-step alone (seconds, median, round-robin): our kernel and numba's at each count; and
    the M-step alone on our E-step's counts (``ours-mstep-{n}``)."""
    import jax
    import jax.numpy as jnp

    from topicjax.artm import algorithm as em
    from topicjax.core import kernels, layout

    state = em.init(jax.random.key(0), train.n_words, train.n_docs, T)
    theta = jax.random.dirichlet(jax.random.key(1), jnp.ones(T), (train.n_docs,)).T.astype(jnp.float32)
    data = layout.prepare(train)
    e, m = compile_pass_parts(state.phi, theta, data)
    n_phi, n_theta = e(state.phi, theta, data)
    runs = {}
    for n in counts:
        runs[f"ours-ffi-{n}"] = (lambda n=n: (pin(n), kernels.set_threads(n)),
                                 lambda: jax.block_until_ready(e(state.phi, theta, data)))
        runs[f"ours-mstep-{n}"] = (lambda n=n: pin(n), lambda: jax.block_until_ready(m(state.phi, theta, n_phi, n_theta)))
    if with_numba:
        from numba_reference import NumbaEStep

        P, Th = np.asarray(state.phi), np.asarray(theta)
        for n in counts:
            k = NumbaEStep(train.doc_offsets, train.word_ids, train.counts, train.n_words, n, np.float32)
            runs[f"numba-{n}"] = (lambda n=n: pin(n), lambda k=k: k(P, Th))
    return round_robin(runs, rounds, per_turn)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=["kos", "20ng"], help="kos, 20ng, bars, or a corpus path")
    ap.add_argument("--topics", nargs="+", type=int, default=[50, 100, 200])
    ap.add_argument("--systems", nargs="+", default=None, help=f"subset of {' '.join(ALL_SYSTEMS)} (default: all)")
    ap.add_argument("--threads", type=int, default=usable_cores(), help="N of the 1-vs-N comparison (default: all usable cores)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of the round-robin")
    ap.add_argument("--per-turn", type=int, default=3, help="timed passes of a system per turn (after one untimed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="seconds-long smoke run on a small synthetic corpus")
    ap.add_argument("--no-pin", action="store_true", help="do not restrict a k-thread pass to k cores")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_threads.md"))
    args = ap.parse_args(argv)
    _PIN["on"] = not args.no_pin
    if args.quick:
        args.corpus, args.topics, args.rounds = ["bars"], [10], 2
    names = args.systems or list(ALL_SYSTEMS)
    try:
        import numba  # noqa: F401

        has_numba = True
    except ImportError:
        has_numba = False
    counts = sorted({1, max(1, args.threads)})
    N = counts[-1]

    from topicjax.core import kernels

    info = kernels.build_info() or {}
    lines = [
        "# Fused E-step: per-pass speed and thread scaling (issue 12)",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in ['experiments/bench_threads.py'] + (argv if argv is not None else sys.argv[1:]))}`",
        "",
        f"Machine: {bench_em.machine()}.  Usable cores: {usable_cores()}.  Load average at start: {load()}.",
        f"Thread counts compared: {', '.join(map(str, counts))}"
        + (" (a k-thread pass runs with the whole process pinned to k cores)" if _PIN["on"] and _CORES else
           " (not pinned: a 1-thread pass may use other cores for work outside the kernel)")
        + ".  Our kernel: "
        + (f"built with `{info.get('flags', '?')}`, default threads {kernels.default_threads()}." if info
           else f"not available ({kernels.load_error()})."),
        "",
    ]
    print("\n".join(lines), flush=True)
    targets = []
    workroot = tempfile.mkdtemp(prefix="bench_threads_")
    for ci, cname in enumerate(args.corpus):
        corpus = bench_em.load_corpus(cname, args.quick)
        train, _, _ = bench_em.split(corpus, args.seed)
        lines += [f"## {cname}: {train.n_docs} training documents, {train.n_words} words, {train.nnz} non-zeros", ""]
        for T in args.topics:
            workdir = Path(workroot) / f"{ci}"
            workdir.mkdir(exist_ok=True)
            systems, missing = make_systems(names, train, T, counts, args.seed, workdir)
            start_load = load()
            times = time_round_robin(systems, args.rounds, args.per_turn)
            ours = {n: times[f"ours-ffi-{n}"][0] for n in counts if f"ours-ffi-{n}" in times}
            lines += [f"### T = {T}: seconds per pass (median of {args.rounds} rounds x {args.per_turn} passes, min in brackets; "
                      f"load at start {start_load})", "",
                      "| system | threads | s/pass | ours-ffi at equal threads / it |", "|---|---|---|---|"]
            for s in systems:
                med, mn = times[s.name]
                n = {"ours-xla": "XLA's", "gensim": 1}.get(s.name, s.threads)
                mine = ours.get(n)
                ratio = f"{mine / med:.3f}" if mine and not s.name.startswith("ours-ffi") else "-"
                lines.append(f"| {s.name} | {n} | {med:.4f} [{mn:.4f}] | {ratio} |")
            for name, why in missing.items():
                lines.append(f"| {name} | - | - | {why} |")
            lines.append("")
            tgt = {"corpus": cname, "T": T}
            if ours:
                es = estep_times(train, T, counts, args.rounds, has_numba and "numba" in names, args.per_turn)
                ms = {k: es.pop(k) for k in list(es) if k.startswith("ours-mstep-")}
                lines += ["E-step alone (ms, median): " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in es.items()), "",
                          "M-step alone (XLA's operations of a pass after the E-step; ms, median): "
                          + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in ms.items()), ""]
                if N > 1:
                    tgt["estep_scaling"] = es["ours-ffi-1"] / es[f"ours-ffi-{N}"]
                    tgt["mstep_scaling"] = ms["ours-mstep-1"] / ms[f"ours-mstep-{N}"]
                for n in counts:
                    if f"numba-{n}" in es:
                        tgt[f"estep_numba_{n}"] = es[f"ours-ffi-{n}"] / es[f"numba-{n}"]
            scale_rows = []
            for base in ("ours-ffi", "numba", "bigartm-1", "bigartm-10"):
                if all(f"{base}-{n}" in times for n in counts) and N > 1:
                    t1, tn = times[f"{base}-1"][0], times[f"{base}-{N}"][0]
                    scale_rows.append(f"| {base} | {t1:.4f} | {tn:.4f} | {t1 / tn:.2f} |")
                    if base == "ours-ffi":
                        tgt["scaling"] = t1 / tn
            if scale_rows:
                lines += [f"Thread scaling at T = {T}:", "", f"| system | s/pass, 1 thread | s/pass, {N} threads | speed-up |",
                          "|---|---|---|---|"] + scale_rows + [""]
            for n in counts:
                if n in ours and f"numba-{n}" in times:
                    tgt[f"numba_{n}"] = ours[n] / times[f"numba-{n}"][0]
                if n in ours and f"bigartm-1-{n}" in times:
                    tgt[f"bigartm_{n}"] = ours[n] / times[f"bigartm-1-{n}"][0]
            targets.append(tgt)
            print("\n".join(lines[-(len(systems) + len(missing) + len(scale_rows) + 14):]), flush=True)
            del systems
    cols = [(f"numba_{n}", f"ours / numba per pass, {n} thr. (<= 1.3)") for n in counts]
    cols += [(f"estep_numba_{n}", f"ours / numba E-step, {n} thr.") for n in counts]
    cols += [(f"bigartm_{n}", f"ours / BigARTM dp=1, {n} thr. (<= 0.15)") for n in counts]
    cols += [("scaling", f"ours: 1 thread / {N} threads (>= 1.8 at 2)"), ("estep_scaling", f"of which the E-step: 1 / {N}"),
             ("mstep_scaling", f"the M-step: 1 / {N}")]
    cols = [c for c in cols if any(c[0] in t for t in targets)]
    if cols:
        lines += ["## Targets of issue 12 (ratios from the tables above)", "",
                  "| corpus | T | " + " | ".join(c[1] for c in cols) + " |", "|---|---|" + "---|" * len(cols)]
        for t in targets:
            lines.append(f"| {t['corpus']} | {t['T']} | " + " | ".join(f"{t[k]:.2f}" if k in t else "-" for k, _ in cols) + " |")
        lines.append("")
    lines.append(f"Load average at the end: {load()}.")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(targets) - 5:]))
    print(f"wrote {out}")
    return targets


if __name__ == "__main__":
    main()
