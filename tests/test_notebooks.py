"""Run every notebook: execute its code cells in order in one namespace, as a kernel would.

Matplotlib draws to the non-interactive Agg backend here (the notebooks themselves leave the
backend to Jupyter, which renders figures inline); figures are closed after each notebook.
Magics and shell lines (``%``, ``!``) are skipped.  Each notebook is meant to run in under a minute
on 2 CPU cores on its bundled or generated corpus; the durations are printed with ``pytest -s``.
"""

import json
import time
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
EXPECTED = {"quickstart.ipynb", "artm_regularizers.ipynb", "ptm_order_selection.ipynb", "ttmm_features.ipynb",
            "lida_ftm.ipynb", "batch_models.ipynb", "tuning.ipynb"}


def test_every_notebook_is_here():
    assert EXPECTED <= {p.name for p in NOTEBOOKS}


def test_notebooks_do_not_choose_a_backend():
    """Figures render inline in Jupyter only if a notebook leaves the backend alone."""
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            assert "matplotlib.use(" not in src and "MPLBACKEND" not in src, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(path.parent)
    nb = json.loads(path.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__notebook__"}
    t0 = time.perf_counter()
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            src = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))
            exec(compile(src, f"{path.name}[cell {i}]", "exec"), namespace)
    finally:
        plt.close("all")
    print(f"{path.name}: {time.perf_counter() - t0:.1f} s")
