"""Run every notebook: execute its code cells in order in one namespace, as a kernel would.

Matplotlib draws to the non-interactive Agg backend here (the notebooks themselves leave the
backend to Jupyter, which renders figures inline); figures are closed after each notebook.
Magics and shell lines (``%``, ``!``) are skipped.  Each notebook is meant to run in under a minute
on 2 CPU cores on its bundled or generated corpus; the durations are printed with ``pytest -s``.

The notebooks are stored with their outputs (issue 45 item 5: the documentation site renders them),
made by ``jupyter nbconvert --execute --to notebook`` from the ``notebooks/`` folder, the
environment's stderr warnings removed.  Every notebook here uses generated corpora only, so every
one stores its outputs; a notebook that reads a third-party corpus must store none.  The run below
also checks that the stored printed output is what the current code prints (numbers aside).

The run sets ``TOPICJAX_NOTEBOOK_SMOKE``: a notebook whose size is most of its time reads it for a
smoke size (every cell still runs and prints what it stores, numbers aside): ``lida_ftm`` 20 sweeps
instead of 200 (its fits at full size are the LIDA guide's, run and held to the figures its text
states by ``tests/test_doc_examples.py``; the notebook's own stored figures are checked below),
``tuning`` 8 and 4 tuner steps instead of 25 and 12.
"""

import contextlib
import io
import json
import re
import time
from pathlib import Path

import pytest

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
EXPECTED = {"quickstart.ipynb", "artm_regularizers.ipynb", "ptm_order_selection.ipynb", "ttmm_features.ipynb",
            "lida_ftm.ipynb", "batch_models.ipynb", "tuning.ipynb"}
# notebooks that read a third-party corpus (KOS, 20 Newsgroups, BBC): stored without outputs
THIRD_PARTY_DATA = set()
MAX_BYTES = 300_000


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _stored_stdout(cell) -> str:
    return "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                   for o in cell.get("outputs", []) if o["output_type"] == "stream" and o["name"] == "stdout")


def _shape(text: str) -> list[str]:
    """Printed text with its numbers masked (timings and float round-off differ between runs); the
    device line of batch_models differs between machines."""
    return [re.sub(r"[-+]?\d[\d.,e+-]*", "#", line) for line in text.splitlines()
            if line.strip() and not line.startswith("fitting on")]


def test_every_notebook_is_here():
    assert EXPECTED <= {p.name for p in NOTEBOOKS}


def test_notebooks_do_not_choose_a_backend():
    """Figures render inline in Jupyter only if a notebook leaves the backend alone."""
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            assert "matplotlib.use(" not in src and "MPLBACKEND" not in src, path.name


def test_notebooks_store_their_outputs():
    """Generated-data notebooks store outputs, a figure as PNG wherever one is drawn, no errors and
    no stderr, in under 300 KB; third-party-data notebooks store none."""
    for path in NOTEBOOKS:
        assert path.stat().st_size < MAX_BYTES, (path.name, path.stat().st_size)
        cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        if path.name in THIRD_PARTY_DATA:
            assert not outputs, f"{path.name} reads third-party data: store it without outputs"
            continue
        assert outputs, f"{path.name} stores no outputs: execute it (see the module docstring)"
        # executed in order, top to bottom, in one run
        assert [c.get("execution_count") for c in cells] == list(range(1, len(cells) + 1)), path.name
        for c in cells:
            if "plt.show()" in _source(c) or "plt.tight_layout()" in _source(c):
                assert any("image/png" in o.get("data", {}) for o in c["outputs"]), (path.name, _source(c)[:200])
        assert not [o for o in outputs if o["output_type"] == "error"], path.name
        assert not [o for o in outputs if o.get("name") == "stderr"], path.name


def test_lida_notebook_stores_the_figures_it_states():
    """The stored numbers of lida_ftm meet what its first cell says good looks like."""
    nb = json.loads((NOTEBOOKS[0].parent / "lida_ftm.ipynb").read_text(encoding="utf-8"))
    intro = re.sub(r"\s+", " ", _source(nb["cells"][0]))
    assert "topics per document within 0.25 of the generated 1.55" in intro
    assert "words per topic between 4 and 6" in intro
    printed = "".join(_stored_stdout(c) for c in nb["cells"] if c["cell_type"] == "code")
    found, generated = map(float, re.search(r"topics per document: ([\d.]+) \(generated: ([\d.]+)\)", printed).groups())
    assert generated == 1.55 and abs(found - generated) < 0.25, printed
    words = float(re.search(r"words per topic: ([\d.]+)", printed).group(1))
    assert 4 <= words <= 6, printed


def _statements(code: str, first: str, last: str) -> str:
    """The code from the line starting with ``first`` to the line ending with ``last``, quotes
    and spaces normalised and comments dropped."""
    lines = [re.sub(r"\s+#.*$", "", l) for l in code.splitlines() if not l.lstrip().startswith("#")]
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith(first))
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(last))
    return re.sub(r"\s+", "", "\n".join(lines[start:end + 1])).replace("'", '"')


def test_lida_notebook_fits_are_the_guides():
    """lida_ftm's corpus and its FTM and LIDA fits (at their full 200 sweeps) are those of the LIDA
    guide's examples, which tests/test_doc_examples.py runs as printed and holds to the figures the
    notebook states: the notebook's test run is a smoke run (20 sweeps, module docstring)."""
    guide = (NOTEBOOKS[0].parent.parent / "docs" / "guides" / "lida.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", guide, flags=re.S | re.M)
    nb = json.loads((NOTEBOOKS[0].parent / "lida_ftm.ipynb").read_text(encoding="utf-8"))
    code = "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "code")
    assert re.search(r"^SWEEPS = 20 if os\.environ\.get\('TOPICJAX_NOTEBOOK_SMOKE'\) else 200$", code, re.M)
    full = code.replace("max_iter=SWEEPS", "max_iter=200")
    for index, variant in ((1, "ftm"), (2, "lida")):
        for first, last in (("rng =", "from_dense(counts)"), (f"{variant} = tj.LIDA(", ".fit(corpus)")):
            assert _statements(full, first, last) == _statements(blocks[index], first, last), (variant, first)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(path.parent)
    monkeypatch.setenv("TOPICJAX_NOTEBOOK_SMOKE", "1")   # smoke sizes (module docstring)
    nb = json.loads(path.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__notebook__"}
    t0 = time.perf_counter()
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "\n".join(l for l in _source(cell).splitlines() if not l.lstrip().startswith(("%", "!")))
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(src, f"{path.name}[cell {i}]", "exec"), namespace)
            if path.name not in THIRD_PARTY_DATA:   # the stored output is the current code's
                assert _shape(printed.getvalue()) == _shape(_stored_stdout(cell)), (
                    f"{path.name}[cell {i}]: the stored output is stale; execute the notebook again")
    finally:
        plt.close("all")
    print(f"{path.name}: {time.perf_counter() - t0:.1f} s")
