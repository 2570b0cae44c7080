"""experiments/bench_online.py, the online benchmark at NYTimes/PubMed size: a smoke run of its
``--quick`` mode on our three entry points (each in its own process), which must fit the same model
(the API, the command line and a loop of ``partial_fit`` run the same online algorithm with the same
seed), well above a uniform Φ, and write one table."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def mod(load_experiment):
    return load_experiment("bench_online")


def test_quick_run_of_our_three_entry_points(mod, tmp_path):
    work, out = tmp_path / "work", tmp_path / "table.md"
    assert mod.main(["--quick", "--workdir", str(work), "--systems", "ours-api", "ours-cli", "ours-partial",
                     "--out", str(out), "--force"]) == 0
    (root,) = [d for d in work.iterdir() if d.is_dir()]
    store = json.loads((root / "summary_store.json").read_text())
    assert not store.get("failed") and store["stages"][0]["stage"].startswith("lda_corpus_parts")
    ppl = {s: json.loads((root / f"summary_{s}_P1.json").read_text())["perplexity"]["1"]
           for s in ("ours-api", "ours-cli", "ours-partial")}
    n_words = np.load(root / "held.npz")["known"].sum()
    # the three paths are one algorithm: equal up to float round-off of the summation order
    assert max(ppl.values()) - min(ppl.values()) <= 1e-3 * min(ppl.values()), ppl
    assert ppl["ours-api"] < 0.5 * n_words  # a uniform Φ scores the vocabulary size
    text = out.read_text()
    assert text.startswith(mod.BEGIN) and text.rstrip().endswith(mod.END)
    assert text.count("| quick |") == 4 and "failed" not in text
