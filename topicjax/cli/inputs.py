"""Reading a corpus from the command line: the options every command that reads one shares."""

from __future__ import annotations

import argparse

from topicjax.data.corpus import Corpus
from topicjax.data.formats import corpus_kind, read_corpus
from topicjax.data.readers.tsv import VOCAB_NAMES, find_table

__all__ = ["add_corpus_options", "read_corpus_args", "FORMAT_CHOICES"]

FORMAT_CHOICES = ("auto", "uci", "vw", "ldac", "texts", "tsv")


def add_corpus_options(p: argparse.ArgumentParser) -> None:
    """``--format``, ``--encoding``, ``--empty-docs``, ``--labels`` and the tokenizer options of
    raw text."""
    g = p.add_argument_group("corpus")
    g.add_argument("--format", default="auto", choices=FORMAT_CHOICES,
                   help="how to read CORPUS (default auto: from the path; a table such as OCTIS's corpus.tsv is "
                        "read only with --format tsv)")
    g.add_argument("--encoding", default="utf-8",
                   help="encoding of the corpus files and vocabulary, every format (e.g. latin-1)")
    g.add_argument("--empty-docs", choices=("error", "drop"), default=None,
                   help="documents without tokens: an error (default for UCI, VW, lda-c) or dropped and counted "
                        "(default for raw text, where stop words and --min-df can empty a document)")
    g.add_argument("--labels", choices=("auto", "yes", "no"), default="auto",
                   help="labels of a text folder (its sub-folders) or a table (its label column): auto uses them "
                        "when present, yes requires them, no ignores them")
    g.add_argument("--vocab", default=None, help="vocabulary file (lda-c, VW, tables; found beside the corpus "
                                                 "when not given)")
    g.add_argument("--min-df", type=int, default=None,
                   help="raw text: drop words in fewer documents than this (default 2 for fit, 1 for evaluate)")
    g.add_argument("--stop-words", choices=("english", "none"), default="english",
                   help="raw text: stop-word list (default english)")


def _labels_flag(value: str):
    return {"auto": None, "yes": True, "no": False}[value]


def read_corpus_args(args, path: str, *, min_df: int = 2, say=print) -> Corpus:
    """The corpus at ``path`` read with the options of :func:`add_corpus_options`; notes about
    dropped documents and skipped files are printed with ``say``."""
    fmt = None if args.format == "auto" else args.format
    kind = fmt or corpus_kind(path)
    kwargs: dict = {"encoding": args.encoding}
    raw = kind in ("texts", "tsv")
    empty = args.empty_docs or ("drop" if raw else "error")
    kwargs["empty_docs"] = empty
    labels = _labels_flag(args.labels)
    if kind in ("texts", "tsv"):
        kwargs["labels"] = labels
    elif labels:
        raise ValueError(f"--labels yes: a {kind} corpus has no labels the command line can read (text folders and "
                         "tables have)")
    if args.vocab is not None:
        if kind == "uci":
            kwargs["vocab_path"] = args.vocab
        elif kind in ("vw", "ldac", "tsv"):
            kwargs["vocab"] = args.vocab
        else:
            raise ValueError(f"--vocab does not apply to a {kind} corpus")
    vectorized = kind == "texts" or (kind == "tsv" and not _tsv_has_vocab(path, args.vocab))
    if vectorized:
        kwargs["min_df"] = args.min_df if args.min_df is not None else min_df
        kwargs["stop_words"] = None if args.stop_words == "none" else args.stop_words
    elif args.min_df is not None:
        raise ValueError(f"--min-df applies to raw text only, not to a {kind} corpus")
    corpus = read_corpus(path, format=kind, **kwargs)
    if corpus.dropped_docs.size:
        say(f"note: {corpus.dropped_docs.size} empty document(s) dropped")
    return corpus


def _tsv_has_vocab(path, vocab) -> bool:
    if vocab is not None:
        return True
    table = find_table(path)
    return any((table.parent / n).is_file() for n in VOCAB_NAMES)
