"""The programs a LIDA fit compiles in a new interpreter (issue 42 item 4): their number and the
seconds JAX spent tracing, lowering and compiling them, per program, from ``jax.monitoring``'s
duration events (``/jax/core/compile/jaxpr_trace_duration``, ``jaxpr_to_mlir_module_duration``,
``backend_compile_duration``).  Run it as its own process, without a compilation cache
(``TOPICJAX_CACHE=off``), at XLA's default settings (what users compile with) or with the test
suite's quick flags in ``XLA_FLAGS`` (``tests/child_env.QUICK_COMPILE_FLAGS``):

    TOPICJAX_CACHE=off python experiments/count_lida_programs.py lda 200 50            # KOS
    TOPICJAX_CACHE=off python experiments/count_lida_programs.py lida 20 50
    TOPICJAX_CACHE=off XLA_FLAGS="--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false" \\
        python experiments/count_lida_programs.py lda 200 50
    TOPICJAX_CACHE=off python experiments/count_lida_programs.py lda 30 16 --bars     # seconds

Arguments: the variant, the sweeps, K (``n_components``); ``--bars`` fits the 300-document bars
corpus instead of KOS (``topicjax.datasets.load_kos``: the shared data folder, or ``--kos FOLDER``).  Compile seconds mean
something only on a quiet machine; the counts do not depend on it.
"""

from __future__ import annotations

import argparse
import collections
import os
import time


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variant", choices=("lda", "lida", "ftm", "sstm"))
    p.add_argument("sweeps", type=int)
    p.add_argument("topics", type=int)
    p.add_argument("--bars", action="store_true", help="the bars corpus (300 documents) instead of KOS")
    p.add_argument("--kos", default=None, help="a UCI folder (default: topicjax.datasets.load_kos())")
    a = p.parse_args(argv)
    import jax.monitoring

    events = collections.defaultdict(list)

    def on_duration(name, secs, **kw):
        if name.startswith("/jax/core/compile/"):
            events[name.rsplit("/", 1)[1]].append((kw.get("fun_name", "?"), secs))

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    import numpy as np
    import topicjax as tj

    if a.bars:
        corpus = tj.datasets.make_bars(n_docs=300, size=5, doc_length=60, alpha=0.5, seed=0).corpus
    elif a.kos:
        corpus = tj.Corpus.from_uci(a.kos)
    else:
        corpus = tj.datasets.load_kos()
    t0 = time.perf_counter()
    model = tj.LIDA(a.topics, variant=a.variant, max_iter=a.sweeps, random_state=0, progress=False).fit(corpus)
    np.asarray(model.phi_)
    fit = time.perf_counter() - t0
    print(f"LIDA({a.topics}, variant={a.variant!r}), {a.sweeps} sweeps, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}: "
          f"fit {fit:.2f} s")
    for kind in ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration", "backend_compile_duration"):
        print(f"  {kind}: {len(events[kind])} events, {sum(s for _, s in events[kind]):.2f} s")
    per = collections.defaultdict(lambda: [0, 0.0])
    for name, secs in events["backend_compile_duration"]:
        per[name][0] += 1
        per[name][1] += secs
    for name, (n, secs) in sorted(per.items(), key=lambda x: -x[1][1]):
        print(f"    {name:36s} {n:3d} {secs:7.2f} s")


if __name__ == "__main__":
    main()
