"""Readers and writers of corpus files.  Each reader is the Corpus constructor of its format
(``read_uci`` is ``Corpus.from_uci``...): it parses with :mod:`topicjax.data.readers` and ends in
:meth:`Corpus.from_entries`.

Formats
-------
UCI bag of words (:func:`read_uci`, :func:`write_uci`)
    ``docword.NAME.txt[.gz]``: three header lines ``D``, ``W``, ``NNZ``, then ``NNZ`` lines
    ``docID wordID count`` with 1-based ids; ``vocab.NAME.txt``: line ``k`` is word ``k``.
    The header is checked against the content (ids in range, exactly ``NNZ`` entries, so a
    truncated file is an error).
Vowpal Wabbit text, as used by BigARTM (:func:`read_vw`, :func:`write_vw`)
    one document per line, ``doc_name word word:3 |@default_class word |@tag t1 t2``: the first
    token names the document, ``|name`` opens a namespace, which becomes a *modality* of the
    corpus (:attr:`Corpus.modalities`, :attr:`Corpus.modality_names`); tokens before the first
    ``|`` and tokens of a namespace without a name belong to ``"@default_class"``.  Document labels
    are the namespace ``@labels``: :func:`write_vw` writes them there and :func:`read_vw` reads
    them back by default, so what one writes the other reads back identically.
lda-c (:func:`read_ldac`, :func:`write_ldac`)
    one document per line, ``N id:count id:count ...`` with ``N`` pairs and 0-based word ids
    (the format of Blei's lda-c and of the PTM reference code); the vocabulary is a separate file,
    one word per line.
Raw text (:func:`read_texts`, :func:`read_text_folder`)
    tokenised by scikit-learn's ``CountVectorizer`` (stop words, ``min_df``, ``max_df``...).
A table of documents (:func:`read_tsv`)
    one document per line, ``text[<TAB>partition]<TAB>label`` (OCTIS's ``corpus.tsv``), the
    words tokenised by a vocabulary file beside it or by ``CountVectorizer``; read only when asked.

:func:`read_corpus` chooses the reader from the form of a path (used by ``topicjax fit CORPUS``),
or takes the one named by ``format=``.  A folder is read as text documents only when it holds
files of a known kind (:data:`~topicjax.data.readers.texts.TEXT_SUFFIXES`: ``*.txt``,
``*.text``, names without a suffix; other files are skipped with a warning) and no table
(``*.tsv``, ``*.csv``, ``*.json``, ``*.jsonl``): a folder such as OCTIS's ``corpus.tsv`` +
``vocabulary.txt`` is a :class:`CorpusError` saying to ask for ``format="tsv"``, not four "text
documents".

Vocabulary keys of a multimodal (VW) corpus
-------------------------------------------
:class:`Corpus` needs distinct vocabulary strings, but the same word may occur in two modalities
(a word ``"sport"`` of the text and a tag ``"sport"``), and these must be two vocabulary entries.
The rule is: the key of a word of modality ``"@default_class"`` is the word itself; the key of a
word ``w`` of any other modality ``m`` is ``"m|w"``.  ``|`` cannot occur inside a VW token or a
namespace name, so keys never collide, and :func:`write_vw` strips the prefix again.
:func:`vw_token` splits a key back into ``(modality, word)``.  A corpus whose words are all in
``"@default_class"`` is read with ``modalities=None`` (a plain bag of words).

Errors
------
Bad content raises :class:`~topicjax.data.corpus.CorpusError` (a ``ValueError``) whose one-line
message starts with the file and line and names the document and the offending value, e.g.
``docword.kos.txt, line 17: document 1: word id 7000 is outside 1..6906 (W in the header)``.
A compressed file that ends early is reported as truncated.  Nothing is silently clipped or
dropped: documents without tokens are an error unless ``empty_docs="drop"`` (then counted in
:attr:`Corpus.dropped_docs`).

Size limits
-----------
No reader allocates in proportion to a number it has not checked against the data: a UCI
header's ``D`` and ``W`` are at most int32 and ``D`` at most
:func:`~topicjax.data.corpus.inferred_size_limit` of the documents that have entries; a vocabulary
inferred from lda-c ids is bounded the same way by the distinct ids (else an error naming the
line, asking for the vocabulary); ids are never renumbered.  Integers are ASCII digits with an
optional sign (``1_000`` and digits of other scripts are refused).  Lines end at ``\\n`` only
(:func:`split_lines`).  VW files may repeat a document name: the documents are kept and a
:class:`~topicjax.data.corpus.CorpusWarning` names the first repetition.

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
