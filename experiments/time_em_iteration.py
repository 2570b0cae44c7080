"""Time one PLSA EM iteration (E-step + M-step) and the peak RSS on a UCI corpus.

    python experiments/time_em_iteration.py ../shared/data/kos --topics 100
"""

import argparse
import resource
import time

import jax
import numpy as np

import topicjax as tj
from topicjax.artm import algorithm as em
from topicjax.core import layout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("corpus", help="any corpus path topicjax can read (UCI folder, VW, lda-c, texts)")
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--iterations", type=int, default=10)
    args = p.parse_args(argv)
    t = time.perf_counter()
    corpus = tj.data.formats.read_corpus(args.corpus)
    print(f"read {corpus!r} in {time.perf_counter() - t:.2f} s")
    data = layout.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, args.topics)
    step = em.make_step()
    state = step(state, data, None)  # compile
    state.phi.block_until_ready()
    times = []
    for _ in range(args.iterations):
        t = time.perf_counter()
        state = step(state, data, None)
        state.phi.block_until_ready()
        times.append(time.perf_counter() - t)
    print(f"T={args.topics}: median {np.median(times):.4f} s/iteration, min {min(times):.4f} s "
          f"over {args.iterations} iterations ({jax.default_backend()})")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
