"""Readers and writers of corpus files.  Each reader is the Corpus constructor of its format
(``read_uci`` is ``Corpus.from_uci``...): it parses with :mod:`topicjax.data.readers` and ends in
:meth:`Corpus.from_entries`.

* :func:`read_uci`, :func:`write_uci`: UCI bag of words, ``docword.NAME.txt[.gz]`` (header
  ``D``, ``W``, ``NNZ``, then ``docID wordID count`` lines, 1-based) and ``vocab.NAME.txt``;
* :func:`read_vw`, :func:`write_vw`: Vowpal Wabbit text as BigARTM writes it, one document per
  line, namespaces as modalities, labels in ``@labels``; a word ``w`` of a modality ``m`` other
  than :data:`DEFAULT_MODALITY` has the vocabulary key ``"m|w"`` (:func:`vw_token` splits it);
* :func:`read_ldac`, :func:`write_ldac`: lda-c, ``N id:count ...`` with 0-based ids, the
  vocabulary in a separate file;
* :func:`read_texts`, :func:`read_text_folder`: raw text through scikit-learn's
  ``CountVectorizer``;
* :func:`read_tsv`: a table ``text[<TAB>partition]<TAB>label`` (OCTIS's ``corpus.tsv``), read
  only when asked;
* :func:`read_corpus`: the reader chosen from the form of a path (``topicjax fit CORPUS``) or
  named by ``format=`` (one of :data:`FORMATS`).  A folder is read as text documents only when it
  holds files of a known kind (:data:`~topicjax.data.readers.texts.TEXT_SUFFIXES`: ``*.txt``,
  ``*.text``, names without a suffix; other files are skipped with a warning) and no table
  (``*.tsv``, ``*.csv``, ``*.json``, ``*.jsonl``; then it is a :class:`CorpusError` asking for
  ``format="tsv"``).

Raises: bad content is a :class:`~topicjax.data.corpus.CorpusError` (a ``ValueError``) whose one
line starts with the file and line and names the document and the value; nothing is clipped or
dropped silently (documents without tokens are an error unless ``empty_docs="drop"``); no reader
allocates in proportion to a number it has not checked against the data.

Each format in full, the vocabulary keys of a multimodal corpus, the errors and the size limits:
``docs/guides/internals.md``, "Corpus files: formats, keys, errors and limits"; their use:
``docs/corpus.md``.

>>> import tempfile, os, topicjax as tj
>>> c = tj.Corpus.from_entries([0, 0, 1], [0, 2, 1], [2, 1, 3], vocab=["a", "b", "c"])
>>> folder = tempfile.mkdtemp()
>>> _ = write_ldac(c, os.path.join(folder, "c.ldac"))
>>> open(os.path.join(folder, "c.ldac")).read()
'2 0:2 2:1\\n1 1:3\\n'
>>> read_corpus(os.path.join(folder, "c.ldac")).equals(c)
True
"""

from __future__ import annotations

from topicjax.data.corpus import Corpus
from topicjax.data.readers.common import read_vocab, split_lines
from topicjax.data.readers.dispatch import FORMATS, corpus_kind, read_entries
from topicjax.data.readers.ldac import write_ldac
from topicjax.data.readers.uci import (
    check_uci_documents,
    empty_run_error,
    find_uci,
    parse_uci_entries,
    parse_uci_header,
    scan_uci_lines,
    write_uci,
)
from topicjax.data.readers.vw import DEFAULT_MODALITY, vw_token, write_vw

__all__ = [
    "DEFAULT_MODALITY",
    "read_uci",
    "write_uci",
    "read_vw",
    "write_vw",
    "vw_token",
    "read_ldac",
    "write_ldac",
    "read_texts",
    "read_text_folder",
    "read_tsv",
    "read_corpus",
    "FORMATS",
    "corpus_kind",
    "read_vocab",
    "find_uci",
    "parse_uci_header",
    "scan_uci_lines",
    "check_uci_documents",
    "empty_run_error",
    "parse_uci_entries",
    "split_lines",
]

# The readers, one per format: each is the Corpus constructor of its format (one implementation;
# the parsing is in topicjax.data.readers, whose functions return entries, not a Corpus).
read_uci = Corpus.from_uci
read_vw = Corpus.from_vw
read_ldac = Corpus.from_ldac
read_texts = Corpus.from_texts
read_text_folder = Corpus.from_text_folder
read_tsv = Corpus.from_tsv


def read_corpus(path, format: str | None = None, **kwargs) -> Corpus:
    """Read a corpus, choosing the reader from what ``path`` is, or by ``format`` (one of
    :data:`FORMATS`).

    * a folder holding ``docword.*.txt[.gz]``, or a file named so: :func:`read_uci`;
    * ``*.vw``, ``*.vw.txt`` (optionally ``.gz``): :func:`read_vw`;
    * ``*.ldac``, ``*.dat``, ``*.lda-c`` (optionally ``.gz``): :func:`read_ldac`, with the
      vocabulary file found beside it;
    * a folder of text documents of a known kind (see the module docstring):
      :func:`read_text_folder` (one document per file, sub-folders as labels);
    * ``format="tsv"`` only: :func:`read_tsv` (a folder holding one ``*.tsv``, or the table).

    Keywords go to the chosen reader.  A path of any other form is a :class:`CorpusError`; a
    missing path a :class:`FileNotFoundError`.
    """
    return Corpus._read(read_entries(path, format, **kwargs))
