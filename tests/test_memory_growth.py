"""Peak memory grows with the corpus as O(non-zeros), never O(non-zeros x topics) (issue 27).

Each family fits a generated corpus at two sizes, each in a fresh process; the growth of the peak
resident memory (VmHWM) between them, per added non-zero (per added token for the LDA sampler), is
bounded.  The bounds are a few times what the lean layouts need (the corpus's own 12 bytes per
non-zero, the device layout's ~12, host temporaries freed as they go) and well below what one
(non-zeros x K) float32 temporary would add at K = 64 topics (256 bytes per non-zero): a regression
to such an array -- the LIDA log-likelihood that wanted 60 GB at NYTimes size, PTM's per-row
outputs, the int64 sort copies of the corpus constructor -- fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import measured_child_env

ROOT = Path(__file__).resolve().parents[1]
K = 64

SCRIPT = r"""
import json, sys, numpy as np
def kb(field):
    return int([l for l in open("/proc/self/status") if l.startswith(field)][0].split()[1]) * 1024
family, n_docs = sys.argv[1], int(sys.argv[2])
import topicjax as tj
from topicjax.data import synthetic
gen = synthetic.LDAGenerator(n_docs=n_docs, n_words=4000, mean_length=120.0, n_topics=20, seed=0)
c = next(gen.chunks(n_docs))
doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(c.offsets))
corpus = tj.Corpus.from_entries(doc, c.word_ids, c.counts, n_words=4000)
del c, doc
K = int(sys.argv[3])
if family == "plsa":
    tj.PLSA(K, max_iter=2, random_state=0, progress=False).fit(corpus)
elif family == "ttmm":
    tj.TTMM(K, n_themes=4, max_iter=2, random_state=0, progress=False).fit(corpus)
elif family == "ptm":
    tj.PTM(K, max_iter=1, random_state=0, progress=False).fit(corpus)
elif family == "lda":
    tj.LIDA(K, variant="lda", max_iter=2, eval_every=1, random_state=0, progress=False).fit(corpus)
print(json.dumps({"peak": kb("VmHWM"), "nnz": corpus.nnz, "tokens": corpus.n_tokens}))
"""


def measure(family: str, n_docs: int) -> dict:
    env = measured_child_env(JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT, family, str(n_docs), str(K)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


#: bytes of peak memory per added non-zero (per added token for "lda")
BOUNDS = {"plsa": 120, "ttmm": 120, "ptm": 200, "lda": 200}


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for the peak resident memory")
@pytest.mark.parametrize("family", sorted(BOUNDS))
def test_peak_memory_grows_linearly_in_the_corpus(family):
    small, big = measure(family, 2000), measure(family, 16000)
    unit = "tokens" if family == "lda" else "nnz"
    per = (big["peak"] - small["peak"]) / (big[unit] - small[unit])
    assert per < BOUNDS[family], (family, f"{per:.0f} bytes per added {unit}", small, big)


@pytest.mark.slow
def test_scale_memory_experiment_quick_run(tmp_path):
    sys.path.insert(0, str(ROOT / "experiments"))
    import scale_memory

    # a smoke run: every stage of both children, on a corpus small enough to take no time
    rows = scale_memory.main(["--quick", "--docs", "200", "--words", "2000", "--topics", "8", "--families", "corpus",
                              "plsa", "--workdir", str(tmp_path)])
    assert [r["family"] for r in rows] == ["corpus", "plsa"]
    assert rows[1]["fit_peak"] >= rows[1]["corpus_peak"] > 0 and len(rows[1]["iteration_s"]) == 1


UCI_SCRIPT = r"""
import json, sys
def kb(field):
    return int([l for l in open("/proc/self/status") if l.startswith(field)][0].split()[1]) * 1024
import topicjax as tj
from topicjax.data.readers import uci
from topicjax.data import entries
# many blocks at both sizes: what grows is what is kept, not one block's temporaries
uci.BLOCK_CHARS, entries.BLOCK = 1 << 18, 1 << 15
corpus = tj.Corpus.from_uci(sys.argv[1])
print(json.dumps({"peak": kb("VmHWM"), "nnz": corpus.nnz}))
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

    peaks = []
    for n_docs in (2000, 20000):
        gen = synthetic.LDAGenerator(n_docs=n_docs, n_words=4000, mean_length=120.0, n_topics=20, seed=0)
        c = next(gen.chunks(n_docs))
        doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(c.offsets))
        corpus = tj.Corpus.from_entries(doc, c.word_ids, c.counts, n_words=4000)
        docword, _ = formats.write_uci(corpus, tmp_path / str(n_docs), "g")
        env = measured_child_env(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-c", UCI_SCRIPT, str(docword)], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        peaks.append(json.loads(out.stdout.strip().splitlines()[-1]))
    small, big = peaks
    per = (big["peak"] - small["peak"]) / (big["nnz"] - small["nnz"])
    assert per < 20, (f"{per:.1f} bytes per added non-zero", small, big)

