"""The corpus options of the command line as plain data: what the parser shows (``--format``,
``--encoding``, ...), the shared corpora a corpus argument may name (``dataset:NAME[:SUBSET]``)
and the test for a 20 Newsgroups bydate folder.  Nothing here imports numpy or JAX, so that
``topicjax --help`` answers at once; :mod:`topicjax.cli.inputs` reads the corpora.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

__all__ = ["add_corpus_options", "corpus_help", "parse_dataset", "is_20newsgroups_folder", "FORMAT_CHOICES",
           "DATASETS", "DATASET_PREFIX"]

FORMAT_CHOICES = ("auto", "uci", "vw", "ldac", "texts", "tsv")

#: what a corpus argument starts with to name a bundled loader of :mod:`topicjax.data.datasets`
DATASET_PREFIX = "dataset:"


class Dataset(NamedTuple):
    loader: str  # the function of topicjax.data.datasets
    folder: str  # its folder under the shared data folder
    subsets: tuple[str, ...]
    default: str  # the loader's own default subset
    about: str


#: The shared real corpora the command line reads through the loaders of
#: :mod:`topicjax.data.datasets` (from ``$TOPICJAX_DATA`` or the shared data folder, never
#: downloaded), as ``dataset:NAME`` or ``dataset:NAME:SUBSET``.
DATASETS = {
    "kos": Dataset("load_kos", "kos", ("all",), "all",
                   "KOS blog entries, UCI bag of words (3,430 documents, 6,906 words, no labels)"),
    "20newsgroups": Dataset("load_20newsgroups", "20newsgroups", ("train", "test", "all"), "train",
                            "20 Newsgroups bydate posts, headers removed, tokenised (English stop words, words in "
                            ">= 5 and <= 50% of the posts; --min-df, --stop-words change that); labels: newsgroups"),
    "bbc": Dataset("load_bbc_news", "bbc_news", ("train", "val", "test", "all"), "all",
                   "BBC News as preprocessed by OCTIS (2,225 documents, 2,949 words, 5 labels)"),
}
_ALIASES = {"bbc_news": "bbc", "20ng": "20newsgroups"}

#: the header of the index of the 20 Newsgroups bydate layout (``index.tsv`` beside the tarball)
_20NG_HEADER = "split\tlabel\tdoc_id\tpath_in_tar"
_20NG_TARBALL = "20news-bydate.tar.gz"


def add_corpus_options(p: argparse.ArgumentParser) -> None:
    """``--format``, ``--encoding``, ``--empty-docs``, ``--labels`` and the tokenizer options of
    raw text."""
    g = p.add_argument_group("corpus")
    g.add_argument("--format", default="auto", choices=FORMAT_CHOICES,
                   help="how to read CORPUS (default auto: from the path; a table such as OCTIS's corpus.tsv is "
                        "read only with --format tsv; a 20 Newsgroups bydate folder, index.tsv beside "
                        "20news-bydate.tar.gz, with auto or tsv)")
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
                   help="raw text: drop words in fewer documents than this (default 2 for fit, 1 for evaluate; "
                        "5 for 20 Newsgroups, as its loader)")
    g.add_argument("--stop-words", choices=("english", "none"), default="english",
                   help="raw text: stop-word list (default english)")


def corpus_help(what: str = "the corpus") -> str:
    """The help text of a CORPUS argument."""
    return (f"{what}: a UCI folder or docword file, a Vowpal Wabbit file, an lda-c file, a folder of text files, a "
            "table (--format tsv), a 20 Newsgroups bydate folder, or dataset:NAME[:SUBSET] for a shared corpus "
            f"({', '.join(DATASETS)}; see topicjax datasets)")


# ------------------------------------------------------------------------------ shared corpora
def parse_dataset(text) -> tuple[str, str] | None:
    """``dataset:NAME[:SUBSET]`` -> ``(NAME, SUBSET)`` (the loader's default subset when none is
    given); ``None`` for a corpus argument that is a path.  An unknown name or subset is a
    ``ValueError`` listing those there are (checked before anything is read)."""
    if not isinstance(text, str) or not text.startswith(DATASET_PREFIX):
        return None
    name, _, subset = text[len(DATASET_PREFIX):].partition(":")
    name = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if name not in DATASETS:
        raise ValueError(f"{text}: unknown dataset {name!r}; the shared corpora are {', '.join(DATASETS)} "
                         "(topicjax datasets lists them)")
    ds = DATASETS[name]
    subset = subset.strip() or ds.default
    if subset not in ds.subsets:
        raise ValueError(f"{text}: {name} has no subset {subset!r}; it has {', '.join(ds.subsets)}")
    return name, subset


def is_20newsgroups_folder(path) -> bool:
    """Whether ``path`` is a folder of the 20 Newsgroups bydate layout: ``index.tsv`` (columns
    split, label, doc_id, path_in_tar) beside ``20news-bydate.tar.gz``."""
    p = Path(path)
    index = p / "index.tsv"
    if not (p.is_dir() and index.is_file() and (p / _20NG_TARBALL).is_file()):
        return False
    try:
        with open(index, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n") == _20NG_HEADER
    except (OSError, UnicodeDecodeError):
        return False
