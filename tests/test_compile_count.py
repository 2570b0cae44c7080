"""Issue 42 item 2: a fit in a new process compiles a handful of programs -- at most 8 for PLSA
and ARTM, at most 12 for any family -- and none of them is a single eager operation (a
``squeeze``, a ``convert_element_type``, a ``stage`` of ``jnp.asarray``: bookkeeping belongs in the
compiled program or on the host in numpy).  Counted with ``jax_log_compiles`` in child
interpreters without any compilation cache (a program loaded from a cache is not compiled), at the
compiler settings of this process (the suite's quick ones, ``tests/conftest.py``: which programs
are compiled does not depend on how XLA optimises them, and they compile in less than half the
time).  One new process per family: a new process is what the limit is about (a second fit in one
process would find programs, and the backend's one-time trial compilation, done by the first).
The processes are forked from one child interpreter that has imported JAX and topicjax but never
started JAX's backend nor compiled anything (tests/forked_peaks.py): each starts as a new
interpreter would after its imports, without paying those imports once per family, and the five
counts are made once per pytest run (tests/run_once.py), whichever xdist worker asks first."""

from __future__ import annotations

import os
import textwrap

import pytest
from child_env import measured_child_env
from forked_peaks import measure_forked
from run_once import once

#: the family's estimator, built in the child (``tj``: topicjax, ``R``: its regularizers)
FITS = {
    "plsa": "tj.PLSA(8, max_iter=12, random_state=0, progress=False)",
    "artm": "tj.ARTM(8, regularizers=[(R.decorrelate(), 1e2), (R.sparse_phi(), 0.05)], max_iter=6, random_state=0, "
            "progress=False)",
    "ptm": "tj.PTM(6, max_iter=4, random_state=0, progress=False)",
    "ttmm": "tj.TTMM(6, n_themes=3, max_iter=8, random_state=0, progress=False)",
    "lida": "tj.LIDA(8, variant='lda', max_iter=12, random_state=0, progress=False)",
}
LIMITS = {"plsa": 8, "artm": 8, "ptm": 12, "ttmm": 12, "lida": 12}

#: the setup of the forking child (tests/forked_peaks.py): the imports and the count of compiled
#: programs, done once; ``programs(fit)`` runs in a forked process, a new one per family
SETUP = textwrap.dedent("""
    import logging
    import jax
    jax.config.update("jax_log_compiles", True)
    names = []

    class Count(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if message.startswith("Compiling "):
                names.append(message.split(" ")[1])

    logging.getLogger("jax").addHandler(Count())
    logging.getLogger("jax").setLevel(logging.DEBUG)
    import topicjax as tj
    from topicjax import regularizers as R

    def programs(fit):
        # a failed fit is reported to its family's test only (the other families are counted)
        try:
            corpus = tj.datasets.make_bars(200, seed=0).corpus
            names.clear()  # the corpus generator's own programs are not the fit's
            model = eval(fit)
            model.fit(corpus)
        except Exception:
            import traceback
            return {"error": traceback.format_exc()}
        return {"names": names}
""")

#: programs of one eager operation (what jnp.asarray, jnp.zeros, indexing, ... compile outside a program)
EAGER = ("stage", "squeeze", "convert_element_type", "broadcast_in_dim", "stack", "concatenate", "maximum", "iota",
         "_threefry_seed", "_threefry_split", "_threefry_fold_in", "unstack", "dynamic_slice", "gather")


def _count_all(folder) -> dict:
    """``{family: names of the programs its fit compiled}``, each fit in a process of its own."""
    env = measured_child_env(JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ.get("XLA_FLAGS", ""))
    families = sorted(FITS)
    found = measure_forked(SETUP, [f"programs({FITS[f]!r})" for f in families], env, timeout=600)
    return dict(zip(families, found))


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict:
    return once(tmp_path_factory, "compile_count", _count_all)[1]


@pytest.mark.parametrize("family", sorted(FITS))
def test_a_fit_compiles_a_handful_of_programs(family, programs):
    assert "error" not in programs[family], programs[family].get("error")
    names = programs[family]["names"]
    assert names, "the count saw no compilation at all: jax_log_compiles' message changed?"
    assert len(names) <= LIMITS[family], names
    eager = [n for n in names if n.removeprefix("jit(").removesuffix(")") in EAGER]
    assert not eager, f"eager operations compiled on {family}'s fit path: {eager}"
