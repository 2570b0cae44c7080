"""Shared fixtures: the folder of real corpora (or a clean skip) and small hand-made corpora."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _share_compiled_programs() -> None:
    """One persistent compilation cache for the whole run (JAX's ``jax_compilation_cache_dir``):
    the suite compiles the same programs many times over -- in both xdist workers, after every
    module's ``jax.clear_caches`` below, and in the child interpreters of a killed and resumed fit,
    of the CLI and of the notebooks -- and on the CI's two cores compiling is most of its time
    (a killed-and-resumed checkpoint module: 114 s without, 71 s with).  The folder is new for
    each run (nothing stale between runs: a run tests its own programs) and removed at the end.
    Set before JAX is imported, so that the workers and every child interpreter inherit it through
    the environment.  Children that measure their peak memory run without it
    (``tests/child_env.py``: ``measured_child_env``): a program loaded from the cache costs less
    memory than one compiled.  A cache set by the caller is kept (then nothing is removed)."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    folder = tempfile.mkdtemp(prefix="topicjax-tests-jit-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    # every program, also those compiled in under JAX's default minimum of a second
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    # No size limit: with one, JAX locks the folder (filelock) and lists it at every write; the
    # suite was then at half of its tests after 14 minutes, against 10 without.  Entries are
    # written in place; a process that read one while another wrote it would warn and compile
    # the program itself.
    atexit.register(shutil.rmtree, folder, True)


#: XLA's CPU compiler settings of the suite (child_env.QUICK_COMPILE_FLAGS): LLVM at -O0, the classic (non-MLIR)
#: fusion emitters and each program's code generated in one piece (not split over XLA's thread pool: tests/core/
#: test_em.py 16% less CPU and 40% less time on 2 loaded cores, child_env).  The suite's inputs are tiny, so its
#: time is XLA compiling several thousand small programs, not running them: tests/core/test_em.py +
#: tests/ttmm/test_ttmm.py took 76 s with XLA's defaults and 27 s with the first two (backend compilation of
#: tests/core/test_em.py's 329 programs: 31 s against 8.7 s); the whole suite 16 min against 33.  What users
#: compile differs in two ways a few tests see: -O0 changes float32 rounding of transcendental functions (a LIDA
#: collapsed likelihood 1.7e-4 from its float64 value, 1e-5 at XLA's defaults) and the classic
#: emitters plan other temporaries (``memory_analysis()``).  Tests marked ``user_compiler``
#: therefore run again in a child interpreter at XLA's defaults (:func:`pytest_pyfunc_call`).
#: "1": this process compiles with QUICK_COMPILE_FLAGS; "0": at XLA's defaults (a re-run child)
_QUICK_ENV = "TOPICJAX_TEST_QUICK_COMPILE"


def _compile_quickly() -> None:
    """Add :data:`QUICK_COMPILE_FLAGS` to ``XLA_FLAGS`` (before JAX is imported, so that the
    workers and child interpreters inherit them), unless this is a ``user_compiler`` re-run; a flag
    the caller set already is kept as set."""
    if os.environ.get(_QUICK_ENV) == "0":
        return
    flags = os.environ.get("XLA_FLAGS", "")
    extra = [f for f in QUICK_COMPILE_FLAGS if f.split("=")[0] not in flags]
    if extra:
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
    os.environ[_QUICK_ENV] = "1" if set(QUICK_COMPILE_FLAGS) <= set(os.environ["XLA_FLAGS"].split()) else "0"


def _compile_sources_once() -> None:
    """Byte-compile topicjax's and the experiments' sources once per run, in the main process,
    when this interpreter writes no bytecode itself (``PYTHONDONTWRITEBYTECODE``, as on our CI):
    each of the run's ~100 child interpreters (CLI, notebooks, experiments' smoke runs, re-runs at
    XLA's defaults) would otherwise compile the package's sources again on import, 0.4 s of CPU a
    child (a child importing every family: 2.4 s with, 2.0 s without).  The bytecode goes where
    Python puts its own (``__pycache__``, ignored by git); an unwritable checkout is left as it is."""
    if not sys.dont_write_bytecode or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder in ("topicjax", "experiments"):
        if (root / folder).is_dir():
            compileall.compile_dir(str(root / folder), quiet=2, workers=1)


from child_env import QUICK_COMPILE_FLAGS, without_quick_flags  # noqa: E402  (plain os: before JAX)

_compile_sources_once()
_share_compiled_programs()
_compile_quickly()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from topicjax.data.corpus import Corpus  # noqa: E402
from topicjax.data.datasets import shared_data_dir  # noqa: E402


def _memory_maps() -> int | None:
    """How many memory maps this process holds (``/proc/self/maps``), or None where unknown."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def _map_limit() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 65530


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: clear when a worker holds more than this share of the kernel's memory-map limit, or this much memory
_MAPS_SHARE = 0.4
_RESIDENT_LIMIT = 3 << 30


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "user_compiler: checks what XLA's default compiler settings produce (float rounding of "
        "transcendental functions, memory_analysis, bit-equality of two programs); run again at those settings "
        "in a child interpreter when the suite compiles quickly (tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    """The modules holding a ``slow`` test first (each in its collected order), then the others.
    xdist hands the tests out in this order as its workers free up, so the run ends on short
    tests and its two workers finish together; a minute-long test handed out last kept one
    worker busy while the other waited.  Whole modules move, so that their module-scoped
    fixtures are still built once per worker."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)  # stable: the order within each group


#: test function's node id -> ({test name: "passed" | "failed" | "skipped"}, output) of its re-run
_DEFAULT_RUNS: dict = {}


def _rerun_at_xla_defaults(item) -> tuple[dict, str]:
    """Every case of ``item``'s test function run in one child interpreter at XLA's default
    compiler settings (once per process; the cases' outcomes read from its JUnit XML)."""
    import subprocess
    import xml.etree.ElementTree as ET

    func_id = item.nodeid.split("[")[0]
    if func_id not in _DEFAULT_RUNS:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's xdist
        env["XLA_FLAGS"] = without_quick_flags(env.get("XLA_FLAGS", ""))
        env[_QUICK_ENV] = "0"
        with tempfile.TemporaryDirectory(prefix="topicjax-rerun-") as tmp:
            report = Path(tmp) / "report.xml"
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                                   f"--junitxml={report}", func_id], cwd=item.config.rootpath, env=env,
                                  capture_output=True, text=True, timeout=900)
            outcomes = {}
            if report.is_file():
                for case in ET.parse(report).iter("testcase"):
                    kinds = {child.tag for child in case}
                    outcomes[case.get("name")] = ("failed" if kinds & {"failure", "error"}
                                                  else "skipped" if "skipped" in kinds else "passed")
        _DEFAULT_RUNS[func_id] = outcomes, proc.stdout[-6000:] + proc.stderr[-2000:]
    return _DEFAULT_RUNS[func_id]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A ``user_compiler`` test, in a process compiling at :data:`QUICK_COMPILE_FLAGS`, takes its
    outcome from a run at XLA's defaults in a new interpreter (all cases of its test function in
    one ``python -m pytest``): it fails with that run's output unless its case passed there."""
    if pyfuncitem.get_closest_marker("user_compiler") is None or os.environ.get(_QUICK_ENV) != "1":
        return None
    outcomes, output = _rerun_at_xla_defaults(pyfuncitem)
    outcome = outcomes.get(pyfuncitem.name)
    if outcome == "skipped":
        pytest.skip("skipped at XLA's default compiler settings (a child interpreter)")
    if outcome != "passed":
        pytest.fail(f"at XLA's default compiler settings (a child interpreter): {outcome or 'not run'}\n{output}",
                    pytrace=False)
    return True


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """After a test module, drop JAX's compiled programs (``jax.clear_caches``) when the process
    holds many of them: each keeps memory maps of its machine code, and a process that reaches the
    kernel's limit on memory maps (``vm.max_map_count``, 65530) crashes XLA's compiler with a
    segmentation fault.  Clearing after every module instead made every module compile again
    the programs the modules before it had compiled (the PLSA and ARTM steps, the LDA sweeps): a
    large share of the suite's time on two cores.  Where the count is unknown (no ``/proc``) the
    caches are cleared after every module, as before."""
    yield
    maps = _memory_maps()
    if maps is not None and maps < _MAPS_SHARE * _map_limit() and _resident_bytes() < _RESIDENT_LIMIT:
        return
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of shared real corpora (``/work/shared/data`` or ``$TOPICJAX_DATA``).

    Skips the test, saying why, when the folder is absent: real corpora are never shipped with
    the repository.
    """
    try:
        return shared_data_dir()
    except FileNotFoundError as e:
        pytest.skip(f"shared data absent ({e})")


@pytest.fixture(scope="session")
def load_experiment():
    """``load_experiment(name, register=False)`` imports ``experiments/<name>.py`` as a module (the
    scripts are not a package) so that tests can smoke-run their ``main(["--quick", ...])``.
    ``register=True`` also puts it in ``sys.modules`` under ``name`` (spawned worker processes
    unpickle its functions by that name)."""
    folder = Path(__file__).resolve().parents[1] / "experiments"

    def load(name: str, register: bool = False):
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        if register:
            sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture(scope="session")
def tiny_corpus() -> Corpus:
    """3 documents over 4 words; dense counts ``[[2,0,1,0],[0,3,0,1],[1,1,1,1]]``."""
    dense = np.array([[2, 0, 1, 0], [0, 3, 0, 1], [1, 1, 1, 1]])
    return Corpus.from_dense(dense, vocab=["apple", "banana", "cherry", "date"], doc_names=["d0", "d1", "d2"])


@pytest.fixture(scope="session")
def labelled_corpus() -> Corpus:
    """4 documents, single labels ``["sport", "tech", "sport", "arts"]``."""
    dense = np.array([[1, 2, 0], [0, 1, 4], [3, 0, 1], [1, 1, 1]])
    return Corpus.from_dense(
        dense, vocab=["ball", "chip", "goal"], labels=["sport", "tech", "sport", "arts"],
        doc_names=["a", "b", "c", "d"],
    )


@pytest.fixture(scope="session")
def multimodal_corpus() -> Corpus:
    """Words in two modalities, the word "sport" in both; multi-label; named documents.

    Vocabulary keys follow :mod:`topicjax.data.formats`' rule (``"@tag|sport"`` for the tag), in the
    order in which :func:`topicjax.data.formats.write_vw` writes them (so it reads back equal).
    """
    vocab = ["match", "sport", "@tag|sport", "@tag|news", "vote"]
    modalities = ["@default_class", "@default_class", "@tag", "@tag", "@default_class"]
    dense = np.array([[2, 1, 1, 1, 0], [0, 0, 0, 1, 3], [1, 4, 1, 0, 1]])
    return Corpus.from_dense(
        dense, vocab=vocab, modalities=modalities, modality_names=["@default_class", "@tag"],
        labels=[["s"], ["p"], ["s", "p"]], label_names=["p", "s"], doc_names=["m1", "m2", "m3"],
    )


@pytest.fixture(scope="session")
def random_corpus() -> Corpus:
    """A seeded random corpus of 40 documents over 30 words, every document at least 8 tokens
    and 3 distinct words (so every completion split applies)."""
    rng = np.random.default_rng(7)
    dense = rng.poisson(0.6, size=(40, 30))
    dense[:, :3] += 1 + rng.integers(0, 3, size=(40, 3))
    return Corpus.from_dense(dense, doc_names=[f"doc{i}" for i in range(40)])
