"""Which reader reads a path: :func:`corpus_kind` from the path's form, :func:`read_entries` by it.

A folder is read as text documents only when it holds files of a known kind
(:data:`~topicjax.data.readers.texts.TEXT_SUFFIXES`: ``*.txt``, ``*.text``, names without a suffix;
other files are skipped with a warning) and no table (``*.tsv``, ``*.csv``, ``*.json``,
``*.jsonl``): a folder such as OCTIS's ``corpus.tsv`` + ``vocabulary.txt`` is a
:class:`~topicjax.data.entries.CorpusError` saying to ask for ``format="tsv"``, not four "text
documents"."""

from __future__ import annotations

import warnings
from pathlib import Path

from topicjax.data.entries import CorpusError, CorpusWarning, Entries
from topicjax.data.readers.ldac import ldac_entries
from topicjax.data.readers.texts import TEXT_SUFFIXES, describe_files, folder_files, text_folder_entries
from topicjax.data.readers.tsv import tsv_entries
from topicjax.data.readers.uci import DOCWORD_NAME, uci_entries
from topicjax.data.readers.vw import vw_entries

__all__ = ["FORMATS", "corpus_kind", "read_entries"]

_VW_SUFFIXES = (".vw", ".vw.txt", ".vw.gz", ".vw.txt.gz")
_LDAC_SUFFIXES = (".ldac", ".dat", ".lda-c", ".ldac.gz", ".dat.gz", ".lda-c.gz")
_TABLE_SUFFIXES = (".tsv", ".csv", ".json", ".jsonl", ".tsv.gz", ".csv.gz")

#: The formats :func:`read_entries` knows, by the name ``format=`` takes.
FORMATS = ("uci", "vw", "ldac", "texts", "tsv")


def corpus_kind(path) -> str:
    """``"uci"``, ``"vw"``, ``"ldac"`` or ``"texts"``: how :func:`read_entries` reads ``path``
    when no ``format`` is given (a table, ``"tsv"``, is never chosen by itself)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    name = p.name.lower()
    if p.is_dir():
        top = [q for q in p.iterdir() if q.is_file() and not q.name.startswith(".")]
        if any(DOCWORD_NAME.match(q.name) for q in top):
            return "uci"
        tables = sorted(q for q in top if q.name.lower().endswith(_TABLE_SUFFIXES))
        if tables:
            raise CorpusError(
                f"{p}: holds {describe_files(p, tables)}, a table rather than a folder of text documents; a table "
                "of documents, one per line (text[<TAB>partition]<TAB>label, as OCTIS's corpus.tsv), is read when "
                "asked: format='tsv' (topicjax: --format tsv); to read the files of the folder as documents "
                "anyway: format='texts' (--format texts)"
            )
        known, others = folder_files(p, TEXT_SUFFIXES)
        if not known:
            found = f"; it holds {describe_files(p, others)}" if others else " (it is empty)"
            raise CorpusError(
                f"{p}: no text documents of a known kind (files named *.txt, *.text or without a suffix){found}"
            )
        return "texts"
    if DOCWORD_NAME.match(p.name):
        return "uci"
    if name.endswith(_VW_SUFFIXES):
        return "vw"
    if name.endswith(_LDAC_SUFFIXES):
        return "ldac"
    if name.endswith((".tsv", ".tsv.gz")):
        raise CorpusError(f"{p}: a table of documents is read when asked: format='tsv' (topicjax: --format tsv)")
    raise CorpusError(
        f"{p}: unknown corpus form; expected a UCI folder or docword.NAME.txt[.gz] file, a Vowpal Wabbit "
        "file (.vw, .vw.txt), an lda-c file (.ldac, .dat) or a folder of raw text files"
    )


def _folder_texts_entries(path, **kwargs) -> Entries:
    """A folder of text documents as :func:`read_entries` reads it: files of a known kind, the
    others skipped with a :class:`~topicjax.data.corpus.CorpusWarning` naming them."""
    if "suffixes" not in kwargs:
        kwargs["suffixes"] = TEXT_SUFFIXES
        _, others = folder_files(path, TEXT_SUFFIXES)
        if others:
            warnings.warn(f"{path}: {len(others)} file(s) of other kinds skipped ({describe_files(path, others)}); "
                          "text documents are files named *.txt, *.text or without a suffix", CorpusWarning,
                          stacklevel=3)
    return text_folder_entries(path, **kwargs)


def read_entries(path, format: str | None = None, **kwargs) -> Entries:
    """Read a corpus file or folder (:func:`topicjax.data.formats.read_corpus`,
    :meth:`topicjax.data.Corpus.load`), choosing the reader from what ``path`` is, or by
    ``format`` (one of :data:`FORMATS`).

    * a folder holding ``docword.*.txt[.gz]``, or a file named so: :func:`~topicjax.data.readers.uci.uci_entries`;
    * ``*.vw``, ``*.vw.txt`` (optionally ``.gz``): :func:`~topicjax.data.readers.vw.vw_entries`;
    * ``*.ldac``, ``*.dat``, ``*.lda-c`` (optionally ``.gz``): :func:`~topicjax.data.readers.ldac.ldac_entries`, with the
      vocabulary file found beside it;
    * a folder of text documents of a known kind (see the module docstring):
      :func:`~topicjax.data.readers.texts.text_folder_entries` (one document per file, sub-folders as labels);
    * ``format="tsv"`` only: :func:`~topicjax.data.readers.tsv.tsv_entries` (a folder holding one ``*.tsv``, or the table).

    Keywords go to the chosen reader.  A path of any other form is a :class:`CorpusError`; a
    missing path a :class:`FileNotFoundError`.
    """
    if format is None:
        kind = corpus_kind(path)
    elif format in FORMATS:
        if not Path(path).exists():
            raise FileNotFoundError(f"{path} does not exist")
        kind = format
    else:
        raise ValueError(f"format must be one of {FORMATS} or None, got {format!r}")
    reader = {"uci": uci_entries, "vw": vw_entries, "ldac": ldac_entries, "texts": _folder_texts_entries,
              "tsv": tsv_entries}[kind]
    return reader(path, **kwargs)
