"""The ``topicjax`` command line.

``topicjax fit [CORPUS]``
    Fit a model and print its topics, perplexity (training and hold-out by document completion),
    sparsity and coherence; without CORPUS, the bundled bars corpus is generated and the printout
    shows every topic as a picture and how well the true bars were recovered.
``topicjax topics DIR``
    Print the top words of a saved model.
``topicjax evaluate DIR CORPUS``
    Hold-out perplexity (document completion) and coherence of a saved model on a corpus.

A bad corpus or model folder ends with a one-line error naming the file and line or document,
exit code 1, no traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from topicjax.evaluation import metrics
from topicjax.data.corpus import Corpus

__all__ = ["main", "MODELS"]


def _plsa(topics, iterations, seed, progress):
    from topicjax.artm.plsa import PLSA

    return PLSA(n_components=topics, max_iter=iterations, tol=0, random_state=seed, progress=progress)


def _model_factories():
    """Model name -> factory(topics, iterations, seed, progress), for the models installed."""
    models = {"plsa": _plsa}
    try:
        from topicjax.artm import ARTM
    except ImportError:
        pass
    else:
        from topicjax import regularizers

        def _artm(topics, iterations, seed, progress):
            # Decorrelated topics from the start, then Θ sparsing switched on once the topics
            # have formed (the regularization trajectory of ARTM sec. 5, lightly weighted).
            start = max(1, iterations // 3)
            return ARTM(
                n_components=topics, max_iter=iterations, tol=0, random_state=seed, progress=progress,
                regularizers=[(regularizers.decorrelate(), 10.0),
                              (regularizers.sparse_theta(), lambda it: 0.05 if it >= start else 0.0)],
            )

        models["artm"] = _artm
    for name, module, cls in (("ptm", "ptm", "PTM"), ("ttmm", "ttmm", "TTMM"), ("lida", "lida", "LIDA")):
        try:
            mod = __import__(f"topicjax.{module}", fromlist=[cls])
            klass = getattr(mod, cls)
        except (ImportError, AttributeError):
            continue
        models[name] = (lambda k: lambda topics, iterations, seed, progress: k(
            n_components=topics, max_iter=iterations, random_state=seed, progress=progress))(klass)
    return models


MODELS = _model_factories


class _CLIError(Exception):
    pass


def _read_corpus(path: str, encoding: str = "utf-8") -> Corpus:
    from topicjax.data.formats import corpus_kind, read_corpus

    if corpus_kind(path) == "texts":
        # Raw text: English stop words out, words seen in one document only dropped, empty files
        # (after tokenising) dropped and counted rather than fatal.
        corpus = read_corpus(path, encoding=encoding, stop_words="english", min_df=2, empty_docs="drop")
        if corpus.dropped_docs.size:
            print(f"note: {corpus.dropped_docs.size} empty document(s) dropped")
        return corpus
    return read_corpus(path)


def _phi(model) -> np.ndarray:
    return np.asarray(model.phi_)


def _print_topics(model, vocab, n=10):
    phi = _phi(model)
    for t, words in enumerate(metrics.top_words(phi, vocab, n)):
        print(f"  topic {t:3d}: {' '.join(words)}")


def cmd_fit(args) -> int:
    from topicjax.data import datasets

    t0 = time.perf_counter()
    bundled = args.corpus is None
    if bundled:
        corpus, true_phi = datasets.make_bars(n_docs=args.docs, seed=args.seed)
        print(f"bundled corpus: 'bars' of Griffiths & Steyvers (2004), {corpus!r}; true topics: 10 bars on a 5x5 grid")
    else:
        corpus = _read_corpus(args.corpus, args.encoding)
        print(f"corpus {args.corpus}: {corpus!r}")
    topics = args.topics if args.topics is not None else (10 if bundled else 20)
    iterations = args.iterations if args.iterations is not None else (300 if bundled else 100)
    corpus.check_topics(topics)
    factories = _model_factories()
    if args.model not in factories:
        raise _CLIError(f"unknown model {args.model!r}; available: {', '.join(sorted(factories))}")
    train, test = corpus.train_test_split(0.1, seed=args.seed) if corpus.n_docs >= 20 else (corpus, None)
    model = factories[args.model](topics, iterations, args.seed, not args.quiet)
    print(f"fitting {args.model.upper()} with {topics} topics, {iterations} iterations, seed {args.seed} ...")
    t_fit = time.perf_counter()
    model.fit(train)
    t_fit = time.perf_counter() - t_fit
    phi = _phi(model)
    print(f"fitted in {t_fit:.1f} s")
    if bundled:
        rec = metrics.topic_recovery(phi, true_phi)
        order = [int(m) for m in rec["matching"] if m >= 0]
        order += [t for t in range(phi.shape[1]) if t not in order]
        print("topics (5x5 pictures, darker = more probable), in the order of the true bars they match:")
        pics = [datasets.bars_picture(phi[:, t]) for t in order]
        for row in range(0, len(pics), 5):
            group = pics[row : row + 5]
            print("   ".join(f"topic {order[row + i]:<4d}" for i in range(len(group))))
            for line in range(len(group[0])):
                print("   ".join(p[line] for p in group))
            print()
        print(f"recovery of the true bars: mean Hellinger distance {rec['distance']:.3f} "
              f"(0 = perfect, 1 = disjoint); worst topic {np.nanmax(rec['per_topic']):.3f}")
    else:
        print("top words:")
        _print_topics(model, train.vocab)
    theta = model.transform(train).T
    print(f"perplexity (training, eq. 56): {metrics.perplexity(phi, theta, train):.3f}")
    if test is not None:
        obs, held = test.completion_split("tokens", seed=args.seed)
        print(f"hold-out perplexity (document completion on {test.n_docs} documents): "
              f"{metrics.heldout_perplexity(phi, obs, held):.3f}")
    print(f"sparsity: Phi {metrics.sparsity(phi, threshold=1e-8):.3f}, Theta {metrics.sparsity(theta, threshold=1e-8):.3f}")
    if not bundled:
        coh = metrics.coherence(phi, train, k=10, measure="npmi")
        print(f"coherence (NPMI, top-10, mean over topics): {np.nanmean(coh):.4f}")
    if args.out:
        model.save(args.out)
        print(f"model saved to {args.out}")
    print(f"total time {time.perf_counter() - t0:.1f} s")
    return 0


def _load_model(path):
    from topicjax.persistence import load

    return load(path)


def cmd_topics(args) -> int:
    model = _load_model(args.model_dir)
    print(f"{type(model).__name__} with {_phi(model).shape[1]} topics from {args.model_dir}")
    _print_topics(model, model.vocab_, args.n)
    return 0


def cmd_evaluate(args) -> int:
    model = _load_model(args.model_dir)
    corpus = _read_corpus(args.corpus, args.encoding)
    n_tokens, n_docs = corpus.n_tokens, corpus.n_docs
    if corpus.vocab != tuple(model.vocab_):
        corpus = corpus.with_vocab(model.vocab_, empty_docs="drop")
        if corpus.n_docs == 0:
            raise _CLIError(f"{args.corpus}: no document shares words with the model's vocabulary")
    usable = corpus.subset(np.flatnonzero(corpus.doc_lengths >= 2))
    obs, held = usable.completion_split("tokens", seed=args.seed)
    phi = _phi(model)
    print(f"{type(model).__name__} from {args.model_dir} on {args.corpus} ({usable.n_docs} documents)")
    oov = n_tokens - corpus.n_tokens  # tokens of words outside the model's vocabulary, dropped
    print(f"out-of-vocabulary tokens dropped: {oov} of {n_tokens} ({100.0 * oov / n_tokens:.2f}%); "
          f"documents left without a known word: {n_docs - corpus.n_docs}")
    print(f"hold-out perplexity (document completion): {metrics.heldout_perplexity(phi, obs, held):.3f}")
    for measure in ("pmi", "npmi", "umass"):
        print(f"coherence {measure} top-10 (mean over topics): {np.nanmean(metrics.coherence(phi, corpus, k=10, measure=measure)):.4f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="topicjax", description="Topic models in JAX.")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a topic model (the bundled bars corpus without CORPUS)")
    f.add_argument("corpus", nargs="?", help="UCI folder or docword file, Vowpal Wabbit file, lda-c file, or folder of text files")
    f.add_argument("--model", default="plsa", help="plsa (default), artm, ptm, ttmm or lida")
    f.add_argument("--topics", type=int, default=None, help="number of topics (10 for bars, else 20)")
    f.add_argument("--iterations", type=int, default=None, help="EM iterations (300 for bars, else 100)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--docs", type=int, default=2000, help="documents of the bundled bars corpus")
    f.add_argument("--out", help="folder to save the fitted model to")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.add_argument("--encoding", default="utf-8", help="encoding of raw text files (e.g. latin-1)")
    f.set_defaults(func=cmd_fit)
    t = sub.add_parser("topics", help="print the top words of a saved model")
    t.add_argument("model_dir")
    t.add_argument("-n", type=int, default=10)
    t.set_defaults(func=cmd_topics)
    e = sub.add_parser("evaluate", help="hold-out perplexity and coherence of a saved model")
    e.add_argument("model_dir")
    e.add_argument("corpus")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--encoding", default="utf-8", help="encoding of raw text files")
    e.set_defaults(func=cmd_evaluate)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (_CLIError, ValueError, FileNotFoundError, OSError) as e:
        print(f"topicjax: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
