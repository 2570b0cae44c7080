"""Peak memory grows with the corpus as O(non-zeros), never O(non-zeros x topics) (issue 27).

Each family fits a generated corpus at two sizes, each in a fresh process; the growth of the peak
resident memory (VmHWM) between them, per added non-zero (per added token for the LDA sampler), is
bounded.  The bounds are a few times what the lean layouts need (the corpus's own 12 bytes per
non-zero, the device layout's ~12, host temporaries freed as they go) and well below what one
(non-zeros x K) float32 temporary would add at K = 64 topics (256 bytes per non-zero): a regression
to such an array -- the LIDA log-likelihood that wanted 60 GB at NYTimes size, PTM's per-row
outputs, the int64 sort copies of the corpus constructor -- fails here.

The fresh processes are forked from one child interpreter that has imported JAX and topicjax
(tests/forked_peaks.py): each starts from the same baseline, as a new interpreter would, without
paying the imports once per measurement.  The sizes are not smaller: the peak of
the small fit is XLA's compiler at its default settings (measured on 2,000 documents, 155k
non-zeros: ~360 MB above the corpus for PLSA, ~380 MB for TTMM, ~600 MB for PTM, ~410 MB for
LDA), not the data, and a (non-zeros x 64) float32 temporary must add more than that noise: ~280 MB
over the 1.1M non-zeros added up to 16,000 documents.  Compiling, not the data, is the time of each
fit (a fit of 16,000 documents took no more CPU time than one of 2,000).  Compiled with XLA's
default fusions and buffer planning, LLVM at -O0 (tests/forked_peaks.py: ``measured_env``): the
programs' arrays are those of users' programs, the compiler's own memory is part of both peaks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from child_env import measured_child_env
from forked_peaks import measure_forked, measured_env

ROOT = Path(__file__).resolve().parents[1]
K = 64

#: the measurements' setup in the child (tests/forked_peaks.py): the imports of every fit, done
#: once; ``fit(family, n_docs, K)`` runs in a forked process and returns its peak and the corpus's size
SETUP = r"""
import numpy as np
import jax, jax.numpy  # imported, not started: each forked process starts its own backend
import topicjax as tj
import topicjax.artm.model, topicjax.ptm.model, topicjax.ttmm.model, topicjax.lida.model
from topicjax.data import synthetic

def fit(family, n_docs, K):
    gen = synthetic.LDAGenerator(n_docs=n_docs, n_words=4000, mean_length=120.0, n_topics=20, seed=0)
    c = next(gen.chunks(n_docs))
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(c.offsets))
    corpus = tj.Corpus.from_entries(doc, c.word_ids, c.counts, n_words=4000)
    del c, doc
    if family == "plsa":
        tj.PLSA(K, max_iter=2, random_state=0, progress=False).fit(corpus)
    elif family == "ttmm":
        tj.TTMM(K, n_themes=4, max_iter=2, random_state=0, progress=False).fit(corpus)
    elif family == "ptm":
        tj.PTM(K, max_iter=1, random_state=0, progress=False).fit(corpus)
    elif family == "lda":
        tj.LIDA(K, variant="lda", max_iter=2, eval_every=1, random_state=0, progress=False).fit(corpus)
    return {"peak": peak_bytes(), "nnz": corpus.nnz, "tokens": corpus.n_tokens}
"""

#: bytes of peak memory per added non-zero (per added token for "lda")
BOUNDS = {"plsa": 120, "ttmm": 120, "ptm": 200, "lda": 200}
#: documents of the small and the big corpus
SIZES = (2000, 16000)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for the peak resident memory")
def test_peak_memory_grows_linearly_in_the_corpus():
    """Every family of :data:`BOUNDS`: its peak grows by less than its bound per added non-zero
    (token).  All eight fits come from one child (a forked process each); a family over its
    bound is reported with the others' results."""
    env = measured_env(JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1", PYTHONPATH=str(ROOT))
    families = sorted(BOUNDS)
    calls = [f"fit({family!r}, {n_docs}, {K})" for family in families for n_docs in SIZES]
    peaks = iter(measure_forked(SETUP, calls, env))
    growth, over = {}, []
    for family in families:
        small, big = next(peaks), next(peaks)
        unit = "tokens" if family == "lda" else "nnz"
        assert big[unit] > 4 * small[unit], (family, small, big)
        per = growth[family] = (big["peak"] - small["peak"]) / (big[unit] - small[unit])
        if not per < BOUNDS[family]:
            over.append((family, f"{per:.0f} bytes per added {unit}", small, big))
    assert not over, (over, {f: round(v) for f, v in growth.items()})


@pytest.mark.slow
def test_scale_memory_experiment_quick_run(tmp_path):
    sys.path.insert(0, str(ROOT / "experiments"))
    import scale_memory

    # a smoke run: every stage of both children, on a corpus small enough to take no time
    rows = scale_memory.main(["--quick", "--docs", "200", "--words", "2000", "--topics", "8", "--families", "corpus",
                              "plsa", "--workdir", str(tmp_path)])
    assert [r["family"] for r in rows] == ["corpus", "plsa"]
    assert rows[1]["fit_peak"] >= rows[1]["corpus_peak"] > 0 and len(rows[1]["iteration_s"]) == 1


UCI_SETUP = r"""
import topicjax as tj
from topicjax.data.readers import uci
from topicjax.data import entries
# many blocks at both sizes: what grows is what is kept, not one block's temporaries
uci.BLOCK_CHARS, entries.BLOCK = 1 << 18, 1 << 15

def read(path):
    corpus = tj.Corpus.from_uci(path)
    return {"peak": peak_bytes(), "nnz": corpus.nnz}
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for the peak resident memory")
def test_corpus_from_uci_keeps_only_its_arrays(tmp_path):
    """``Corpus.from_uci`` streams the docword file a block of lines at a time into int32 columns
    that become the Corpus's own arrays: its peak grows by about those 12 bytes per non-zero, not by
    the file's text (~15 bytes per entry), int64 parse tables (24) or a copy made by the
    constructor (12), as it did when the whole file was read as one string (7.2 GiB at NYTimes size)."""
    import numpy as np

    import topicjax as tj
    from topicjax.data import formats, synthetic

    docwords = []
    for n_docs in (2000, 20000):
        gen = synthetic.LDAGenerator(n_docs=n_docs, n_words=4000, mean_length=120.0, n_topics=20, seed=0)
        c = next(gen.chunks(n_docs))
        doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(c.offsets))
        corpus = tj.Corpus.from_entries(doc, c.word_ids, c.counts, n_words=4000)
        docwords.append(str(formats.write_uci(corpus, tmp_path / str(n_docs), "g")[0]))
    # each read in a process of its own, forked from one child (tests/forked_peaks.py)
    env = measured_child_env(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    peaks = measure_forked(UCI_SETUP, [f"read({path!r})" for path in docwords], env)
    small, big = peaks
    per = (big["peak"] - small["peak"]) / (big["nnz"] - small["nnz"])
    assert per < 20, (f"{per:.1f} bytes per added non-zero", small, big)

