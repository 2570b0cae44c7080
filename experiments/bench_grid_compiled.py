"""Per-model-iteration cost of the compiled computations behind ``ARTM.fit_grid``, without the
host work of an estimator call (corpus layout, initial states, copying every model's Φ and Θ back,
building the fitted objects): what a batch of models costs the device itself (issue 7).

Timed (best of ``--rounds`` after a warm-up), per model and iteration, for G models at T topics:

* ``artm grid``: the compiled ``fit_grid`` runner (``lax.scan`` over iterations, all G models
  vmapped; the E-step under vmap is :func:`topicjax.core.em._sliced_counts_models`);
* ``artm vmapped step``: the vmapped ARTM step called from a Python loop;
* ``plsa vmapped``: ``jax.vmap`` of ``em.run_scan`` over G PLSA models;
* ``plsa single``: one PLSA model's ``em.run_scan`` (G times its time), the sequential baseline
  without any Python overhead.

Example::

    python experiments/bench_grid_compiled.py --corpus kos 20ng --topics 100 --models 32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["kos"])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--models", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import jax
    import jax.numpy as jnp

    import bench_grid
    from bench_em import load_corpus
    from topicjax.core import em
    from topicjax.artm.model import _build

    if args.quick:
        args.corpus, args.topics, args.models, args.iterations, args.rounds = ["bars"], 5, 3, 2, 1
    G, T, N = args.models, args.topics, args.iterations

    def best(f):
        jax.block_until_ready(f())
        ts = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            ts.append(time.perf_counter() - t0)
        return min(ts)

    rows = []
    for name in args.corpus:
        tr = load_corpus(name, args.quick)
        base = bench_grid.make_base(T, N)
        s = base._prepare_fit(tr, None)
        states = base._initial_states(base, s, [0] * G, [T] * G)
        tables = jnp.asarray(np.repeat(bench_grid.grid_taus(G)[:, None, :], N, 1), jnp.float32)
        fns = _build(s.bound, 1, True, True)
        aux = base._aux(s)
        res = {"artm grid": best(lambda: fns.grid(states, s.data, tables, aux, N, G))}
        vstep = jax.jit(jax.vmap(fns.step, in_axes=(0, None, 0, None)))

        def artm_loop():
            st = states
            for i in range(N):
                st = vstep(st, s.data, tables[:, i], aux)
            return st

        res["artm vmapped step"] = best(artm_loop)
        plsa = em.make_step(jit=False)
        st0 = jax.vmap(lambda k: em.init(k, tr.n_words, tr.n_docs, T))(jax.random.split(jax.random.key(0), G))
        runv = jax.jit(jax.vmap(lambda x: em.run_scan(lambda y: plsa(y, s.data, None), x, N)))
        res["plsa vmapped"] = best(lambda: runv(st0))
        run1 = jax.jit(lambda x: em.run_scan(lambda y: plsa(y, s.data, None), x, N))
        res["plsa single (x G)"] = best(lambda: run1(jax.tree.map(lambda a: a[0], st0))) * G
        per = {k: v / (N * G) * 1e3 for k, v in res.items()}
        rows.append((name, per))
        print(f"{name} ({jax.default_backend()}, T={T}, G={G}): "
              + " | ".join(f"{k}: {v:.3f} ms/model-iteration" for k, v in per.items()), flush=True)
    return rows


if __name__ == "__main__":
    main()
