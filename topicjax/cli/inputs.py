"""Reading a corpus from the command line with the options of :mod:`topicjax.cli.corpus_options`:
a path in any format, a 20 Newsgroups bydate folder, or a shared corpus (``dataset:NAME[:SUBSET]``)
read by the loaders of :mod:`topicjax.data.datasets`; and ``topicjax datasets``.
"""

from __future__ import annotations

from pathlib import Path

from topicjax.cli.corpus_options import (DATASET_PREFIX, DATASETS, FORMAT_CHOICES, add_corpus_options,
                                         is_20newsgroups_folder, parse_dataset)
from topicjax.data import datasets
from topicjax.data.corpus import Corpus
from topicjax.data.formats import corpus_kind, read_corpus
from topicjax.data.readers.tsv import VOCAB_NAMES, find_table
from topicjax.persistence import holds_model

__all__ = ["add_corpus_options", "read_corpus_args", "check_corpus_path", "parse_dataset", "dataset_folder",
           "is_20newsgroups_folder", "cmd_datasets", "FORMAT_CHOICES", "DATASETS", "DATASET_PREFIX"]


def dataset_folder(name: str) -> Path:
    """The folder the loader of dataset ``name`` reads (``FileNotFoundError`` saying where it was
    looked for, as :func:`topicjax.data.datasets.shared_data_dir`)."""
    path = datasets.shared_data_dir() / DATASETS[name].folder
    if not path.is_dir():
        raise FileNotFoundError(f"shared corpus folder {path} is absent (dataset:{name}); set TOPICJAX_DATA to the "
                                "folder of the shared corpora")
    return path


def _refuse_options(args, what: str, *, tokenizer: bool, formats=("auto",)) -> None:
    """The corpus options that do not apply to ``what`` (a loader reads it as the API does):
    those given are one error naming them all."""
    given = [flag for flag, on in (("--format", args.format not in formats), ("--vocab", args.vocab is not None),
                                   ("--encoding", args.encoding.replace("_", "-").lower() not in ("utf-8", "utf8")),
                                   ("--labels", args.labels != "auto"), ("--empty-docs", args.empty_docs is not None),
                                   ("--min-df", not tokenizer and args.min_df is not None)) if on]
    if given:
        raise ValueError(f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to {what} (read by its "
                         "loader in topicjax.data.datasets, as the API reads it)")


def _vectorizer_options(args) -> dict:
    opts = {} if args.min_df is None else {"min_df": args.min_df}
    if args.stop_words == "none":
        opts["stop_words"] = None
    return opts


def _read_dataset(args, name: str, subset: str) -> Corpus:
    _refuse_options(args, f"{DATASET_PREFIX}{name}", tokenizer=name == "20newsgroups")
    dataset_folder(name)  # the folder looked for, named, when it is absent
    if name == "kos":
        return datasets.load_kos()
    if name == "bbc":
        return datasets.load_bbc_news(subset)
    return datasets.load_20newsgroups(subset, **_vectorizer_options(args))


# ------------------------------------------------------------------------------- reading one
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
    dropped documents and skipped files are printed with ``say``.

    ``dataset:NAME[:SUBSET]`` is read by the loader of :mod:`topicjax.data.datasets`, and a folder
    of the 20 Newsgroups bydate layout (:func:`is_20newsgroups_folder`, with ``--format auto`` or
    ``tsv``, the format the folder suggests) by that loader too, every post of it."""
    fmt = None if args.format == "auto" else args.format
    dataset = parse_dataset(path)
    if dataset is not None:
        corpus = _read_dataset(args, *dataset)
    elif fmt in (None, "tsv") and is_20newsgroups_folder(path):
        _refuse_options(args, f"the 20 Newsgroups folder {path}", tokenizer=True, formats=("auto", "tsv"))
        corpus = datasets.load_20newsgroups("all", folder=path, **_vectorizer_options(args))
    else:
        corpus = _read_path(args, path, fmt, min_df)
    if corpus.dropped_docs.size:
        say(f"note: {corpus.dropped_docs.size} empty document(s) dropped")
    return corpus


def _read_path(args, path, fmt, min_df: int) -> Corpus:
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
    return read_corpus(path, format=kind, **kwargs)


def _tsv_has_vocab(path, vocab) -> bool:
    if vocab is not None:
        return True
    table = find_table(path)
    return any((table.parent / n).is_file() for n in VOCAB_NAMES)


# ----------------------------------------------------------------------------------- datasets
def cmd_datasets(args) -> int:
    """``topicjax datasets``: the shared corpora, their subsets and whether each is present."""
    try:
        root = datasets.shared_data_dir()
    except FileNotFoundError as e:
        root, why = None, str(e)
    print(f"shared corpora in {root}" if root is not None else f"shared corpora: {why}")
    for name, ds in DATASETS.items():
        here = root is not None and (root / ds.folder).is_dir()
        subsets = ", ".join(f"{s} (default)" if s == ds.default else s for s in ds.subsets)
        print(f"  dataset:{name:<13s} {'present' if here else 'absent '}  subsets: {subsets}")
        print(f"      {ds.about}")
    print("read one as the corpus of any command, e.g. topicjax fit dataset:kos --topics 20")
    return 0
