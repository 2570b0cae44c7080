"""Peak memory and time of each family at NYTimes size, one process per measurement (issue 27).

The corpus (300k documents, 102,660 words, ~67 M non-zeros, ~100 M tokens, 100 planted topics) is
generated once by :class:`topicjax.data.synthetic.LDAGenerator` with the ``nytimes`` preset and
cached as an ``.npz`` of its CSR arrays.  Each measurement runs in a fresh Python process (so one
system's memory never counts against another's) and reports the process's peak resident memory
(``ru_maxrss``) after each stage: the corpus built from the arrays, then a fit of ``--iterations``
iterations.  Timings are results only on a quiet machine (``uptime`` load < 1); memory is not
affected by the load.

    python experiments/scale_memory.py --families corpus plsa ttmm ptm lda --iterations 1
    python experiments/scale_memory.py --quick          # a 3,000-document corpus, seconds
    python experiments/scale_memory.py --quick --docs 200 --words 2000 --topics 8   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import numpy as np
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path, family, iterations, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import topicjax as tj
out = {"import_peak": peak()}
z = np.load(path)
t0 = time.perf_counter()
corpus = tj.Corpus.from_entries(z["doc_ids"], z["word_ids"], z["counts"], n_words=int(z["n_words"]))
out.update(corpus_s=time.perf_counter() - t0, corpus_peak=peak(), nnz=corpus.nnz, tokens=corpus.n_tokens,
           corpus_bytes=sum(a.nbytes for a in (corpus.doc_ids, corpus.word_ids, corpus.counts)))
del z
t0 = time.perf_counter()
if family == "plsa":
    m = tj.PLSA(T, max_iter=iterations, random_state=0, progress=False).fit(corpus)
elif family == "ttmm":
    m = tj.TTMM(T, n_themes=20, max_iter=iterations, random_state=0, progress=False).fit(corpus)
elif family == "ptm":
    m = tj.PTM(T, max_iter=iterations, random_state=0, progress=False).fit(corpus)
elif family == "lda":
    m = tj.LIDA(T, variant="lda", max_iter=iterations, eval_every=iterations, random_state=0, progress=False).fit(corpus)
if family != "corpus":
    out.update(fit_s=time.perf_counter() - t0, fit_peak=peak(),
               iteration_s=[float(h.get("seconds", float("nan"))) for h in getattr(m, "history_", [])])
print(json.dumps(out))
"""


def corpus_file(workdir: Path, quick: bool, docs: int | None = None, words: int | None = None) -> Path:
    """The generated corpus's ``.npz`` in ``workdir`` (written on first use): the ``nytimes``
    preset, with 3,000 documents when ``quick``, or ``docs`` documents / ``words`` words when given."""
    import numpy as np

    from topicjax.data import synthetic

    preset = dict(synthetic.PRESETS["nytimes"])
    if quick:
        preset["n_docs"] = 3000
    if docs is not None:
        preset["n_docs"] = docs
    name = f"nytimes_{preset['n_docs']}"
    if words is not None and words != preset["n_words"]:
        preset["n_words"] = words
        name += f"x{words}"
    path = workdir / f"{name}.npz"
    if path.exists():
        return path
    gen = synthetic.LDAGenerator(**preset, n_topics=100, seed=0)
    chunks = list(gen.chunks(20_000))
    doc = np.concatenate([np.repeat(np.arange(c.first, c.first + len(c.lengths), dtype=np.int32), np.diff(c.offsets))
                          for c in chunks])
    np.savez(path, doc_ids=doc, word_ids=np.concatenate([c.word_ids for c in chunks]),
             counts=np.concatenate([c.counts for c in chunks]), n_words=gen.n_words)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=["corpus", "plsa", "ttmm", "ptm", "lda"])
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--workdir", default="/tmp/topicjax-scale")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--docs", type=int, default=None, help="documents of the corpus (default: NYTimes's; 3,000 with "
                                                           "--quick)")
    ap.add_argument("--words", type=int, default=None, help="words of the vocabulary (default: NYTimes's 102,660)")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    path = corpus_file(workdir, args.quick, args.docs, args.words)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows = []
    for fam in args.families:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), fam, str(args.iterations), str(args.topics)],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(f"{fam}: FAILED\n{proc.stderr[-2000:]}", flush=True)
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r.update(family=fam, wall_s=time.perf_counter() - t0)
        rows.append(r)
        gb = 1 / 2**30
        line = (f"{fam}: corpus {r['corpus_s']:.1f} s, peak {r['corpus_peak'] * gb:.2f} GiB "
                f"(its arrays {r['corpus_bytes'] * gb:.2f} GiB, {r['nnz']:,} non-zeros)")
        if "fit_s" in r:
            line += f"; fit {r['fit_s']:.1f} s, iterations {[round(x, 2) for x in r['iteration_s']]}, " \
                    f"peak {r['fit_peak'] * gb:.2f} GiB"
        print(line, flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return rows


if __name__ == "__main__":
    main()
