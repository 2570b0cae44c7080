"""Reading a corpus from the command line: the options every command that reads one shares."""

from __future__ import annotations

import argparse
from pathlib import Path

from topicjax.data.corpus import Corpus
from topicjax.data.formats import corpus_kind, read_corpus
from topicjax.data.readers.tsv import VOCAB_NAMES, find_table
from topicjax.persistence import holds_model

__all__ = ["add_corpus_options", "read_corpus_args", "check_corpus_path", "FORMAT_CHOICES"]

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


_KIND_NAMES = {"uci": "UCI bag-of-words", "vw": "Vowpal Wabbit", "ldac": "lda-c"}


def check_corpus_path(path, fmt: str | None) -> None:
    """Refuse, naming the path, what is not the corpus a command wants: a saved topicjax model
    (``evaluate MODEL MODEL``), or a ``--format`` that the file's own name contradicts (a
    ``docword.*`` file or folder of them is UCI, ``*.vw`` Vowpal Wabbit, ``*.ldac`` lda-c; weaker
    guesses, such as a folder of text files, never contradict a format given)."""
    if holds_model(path):
        raise ValueError(f"{path} is a saved topicjax model, not a corpus: the command reads a corpus here (a UCI "
                         "folder or docword file, a VW or lda-c file, a folder of texts)")
    if fmt is None or not Path(path).exists():
        return
    try:
        found = corpus_kind(path)
    except (ValueError, OSError):
        return  # the reader asked for says what is wrong with the path
    if found in _KIND_NAMES and found != fmt:
        raise ValueError(f"--format {fmt} contradicts {path}: its name says it is a {_KIND_NAMES[found]} corpus; pass "
                         f"--format {found} (or leave --format out)")


def _labels_flag(value: str):
    return {"auto": None, "yes": True, "no": False}[value]


def read_corpus_args(args, path: str, *, min_df: int = 2, say=print) -> Corpus:
    """The corpus at ``path`` read with the options of :func:`add_corpus_options`; notes about
    dropped documents and skipped files are printed with ``say``."""
    fmt = None if args.format == "auto" else args.format
    check_corpus_path(path, fmt)
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
