"""Time reference coherence (C_V, window 110) of 100 topics x top-10 words on 20 Newsgroups.

Side by side: topicjax's :func:`topicjax.evaluation.coherence.reference_coherence` (window counts of the
union of top words on the device, all topics in one call) and gensim's ``CoherenceModel`` (one
process) on the same reference texts and topics; both values are printed and compared.

Reference: the 20 Newsgroups posts (``--subset``, headers removed) tokenised as
:func:`topicjax.data.datasets.load_20newsgroups` tokenises them (letters only, lower case), stop words
and rare words kept as gaps.  Topics: the top words of a PLSA fit (``--topics plsa``, the default,
``--iterations`` EM iterations) or words drawn by frequency (``--topics random``, no fit).

    python experiments/bench_coherence.py                      # 20NG train, 100 PLSA topics, with gensim
    python experiments/bench_coherence.py --no-gensim --topics random
    python experiments/bench_coherence.py --quick              # seconds: 500 posts, 20 topics

Time the warm call (the first one also compiles); the machine must be quiet (uptime load < 1).
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import re
import tarfile
import time

import numpy as np

from topicjax.data.datasets import load_20newsgroups, shared_data_dir
from topicjax.evaluation.coherence import reference_coherence
from topicjax.evaluation.reference_texts import ReferenceTexts

TOKEN_PATTERN = r"(?u)\b[a-zA-Z][a-zA-Z]+\b"  # load_20newsgroups' pattern


def read_posts(subset: str, n_docs: int | None, seed: int) -> list[str]:
    """The posts ``load_20newsgroups(subset, n_docs=..., seed=...)`` reads, headers removed."""
    folder = shared_data_dir() / "20newsgroups"
    with open(folder / "index.tsv", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, line.rstrip("\n").split("\t"))) for line in fh]
    rows = [r for r in rows if subset == "all" or r["split"] == subset]
    if n_docs is not None:
        pick = np.sort(np.random.default_rng(seed).choice(len(rows), size=min(n_docs, len(rows)), replace=False))
        rows = [rows[i] for i in pick]
    wanted = {r["path_in_tar"]: i for i, r in enumerate(rows)}
    texts: list[str] = [""] * len(rows)
    with tarfile.open(folder / "20news-bydate.tar.gz", "r:gz") as tar:
        for member in tar:
            i = wanted.get(member.name)
            if i is not None and member.isfile():
                raw = tar.extractfile(member).read().decode("latin-1")
                _, sep, body = raw.partition("\n\n")
                texts[i] = body if sep else raw
    return texts


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", default="train")
    ap.add_argument("--n-docs", type=int, default=None)
    ap.add_argument("--n-topics", type=int, default=100)
    ap.add_argument("--top-n", type=int, default=10)
    ap.add_argument("--topics", choices=["plsa", "random"], default="plsa")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-gensim", action="store_true")
    ap.add_argument("--quick", action="store_true", help="500 posts, 20 topics, random topics")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_docs, args.n_topics, args.topics, args.repeats = 500, 20, "random", 1
    print(f"load: {os.getloadavg()[0]:.2f} (timings are meaningful only below 1)")

    t = time.perf_counter()
    corpus = load_20newsgroups(args.subset, n_docs=args.n_docs)
    texts = read_posts(args.subset, args.n_docs, 0)
    ref = ReferenceTexts.from_texts(texts, vocab=corpus.vocab, token_pattern=TOKEN_PATTERN)
    print(f"reference: {ref} ({time.perf_counter() - t:.1f} s to read and tokenise)")

    if args.topics == "plsa":
        from topicjax import PLSA

        t = time.perf_counter()
        model = PLSA(n_components=args.n_topics, max_iter=args.iterations, random_state=0, progress=False).fit(corpus)
        phi = np.asarray(model.phi_)
        print(f"PLSA fit: {time.perf_counter() - t:.1f} s")
    else:
        rng = np.random.default_rng(0)
        p = corpus.word_counts / corpus.word_counts.sum()
        phi = np.zeros((corpus.n_words, args.n_topics))
        for t_ in range(args.n_topics):  # top words drawn by frequency, ranked as drawn
            phi[rng.choice(corpus.n_words, size=args.top_n, replace=False, p=p), t_] = np.arange(args.top_n, 0, -1)
    order = np.argsort(-phi, axis=0, kind="stable")[: args.top_n].T
    topics = [[corpus.vocab[i] for i in row] for row in order]
    print(f"{len(topics)} topics x top-{args.top_n}, {len({w for t in topics for w in t})} distinct words")

    times = []
    for r in range(args.repeats + 1):
        t = time.perf_counter()
        ours = reference_coherence(phi, ref, measure="c_v", top_n=args.top_n)
        times.append(time.perf_counter() - t)
    print(f"topicjax c_v: first call {times[0]:.2f} s (with compilation), then "
          f"{' '.join(f'{x:.2f}' for x in times[1:])} s; mean C_V {np.nanmean(ours):.4f}")

    if not args.no_gensim:
        from gensim.corpora import Dictionary
        from gensim.models import CoherenceModel

        pattern = re.compile(TOKEN_PATTERN)
        tokens = [pattern.findall(x.lower()) for x in texts]
        t = time.perf_counter()
        dictionary = Dictionary(tokens)
        cm = CoherenceModel(topics=topics, texts=tokens, dictionary=dictionary, coherence="c_v",
                            topn=args.top_n, processes=1)
        theirs = np.asarray(cm.get_coherence_per_topic())
        g = time.perf_counter() - t
        print(f"gensim c_v (1 process, Dictionary included): {g:.2f} s; max |difference| "
              f"{np.nanmax(np.abs(theirs - ours)):.2e}; gensim / topicjax time: {g / min(times[1:]):.1f}")


if __name__ == "__main__":
    main()
