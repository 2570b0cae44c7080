"""Issue 42 item 2: a fit in a new process compiles a handful of programs -- at most 8 for PLSA
and ARTM, at most 12 for any family -- and none of them is a single eager operation (a
``squeeze``, a ``convert_element_type``, a ``stage`` of ``jnp.asarray``: bookkeeping belongs in the
compiled program or on the host in numpy).  Counted with ``jax_log_compiles`` in child
interpreters without any compilation cache (a program loaded from a cache is not compiled), at the
compiler settings of this process (the suite's quick ones, ``tests/conftest.py``: which programs
are compiled does not depend on how XLA optimises them, and they compile in less than half the
time).  One child per family: a new process is what the limit is about (a second fit in one
process would find programs, and the backend's one-time trial compilation, done by the first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from child_env import measured_child_env

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

CHILD = textwrap.dedent("""
    import json, logging, sys
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
    corpus = tj.datasets.make_bars(200, seed=0).corpus
    names.clear()  # the corpus generator's own programs are not the fit's
    model = {fit}
    model.fit(corpus)
    print("PROGRAMS" + json.dumps(names))
""")

#: programs of one eager operation (what jnp.asarray, jnp.zeros, indexing, ... compile outside a program)
EAGER = ("stage", "squeeze", "convert_element_type", "broadcast_in_dim", "stack", "concatenate", "maximum", "iota",
         "_threefry_seed", "_threefry_split", "_threefry_fold_in", "unstack", "dynamic_slice", "gather")


def _programs(family: str) -> list[str]:
    env = measured_child_env(JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ.get("XLA_FLAGS", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD.format(fit=FITS[family])], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("PROGRAMS")][-1]
    return json.loads(line[len("PROGRAMS"):])


@pytest.mark.parametrize("family", sorted(FITS))
def test_a_fit_compiles_a_handful_of_programs(family):
    names = _programs(family)
    assert names, "the count saw no compilation at all: jax_log_compiles' message changed?"
    assert len(names) <= LIMITS[family], names
    eager = [n for n in names if n.removeprefix("jit(").removesuffix(")") in EAGER]
    assert not eager, f"eager operations compiled on {family}'s fit path: {eager}"
