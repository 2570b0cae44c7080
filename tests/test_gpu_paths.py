"""The GPU's code paths on CPU (issue 30, item 2): each check runs a subset of this suite in a
fresh pytest process, whose environment must be set before JAX starts.

* ``TOPICJAX_ESTEP=xla TOPICJAX_LIDA=xla``: the pure-JAX E-step (PLSA/ARTM, its batched form for
  vmapped models, PTM's E-step, trial flips and flip ranking, TTMM's E-step) and LIDA's XLA
  token sweep (GPUs run it for the exact and stale modes and the MH draw, and where the Pallas
  sweep cannot be built), through tests of the E-step, the EM step, the drivers (a
  batch of models vmapped, as GPUs run ``fit_many``), LIDA's parallel sweep, PTM's GEM step and
  vmapped restarts, and TTMM's EM.  Hypergradients are not among them: they differentiate the
  pure-JAX E-step whatever the setting, so the suite itself runs them on the GPU's path.  A
  probe (a pytest plugin written here) records the topicjax FFI kernels that each test traces:
  none may come from the subset, and one control test that selects the C++ kernels itself must
  show up, so the probe is seen to work.  The subset's ``user_compiler`` tests run in a second
  child at XLA's default compiler settings (with the probe too), the others at the suite's quick
  ones.
* ``XLA_FLAGS=--xla_force_host_platform_device_count=4``: the in-process tests whose behaviour
  depends on the number of local devices (sharded fits and their checkpoints, ``run_many``'s
  ``"devices"`` mode, which ``fit_many`` takes by default with several CPU devices, the
  benchmark's sharded pass), with 4 host devices.  The tests that start processes of their own
  with 4 devices, or two ``jax.distributed`` processes (tests/multidevice.py), run in the suite
  itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from topicjax.core import kernels

ROOT = Path(__file__).resolve().parents[1]

# Tests that go through the backend switches (topicjax.core.kernels.use_ffi,
# topicjax.lida.kernel.use_kernel) without choosing a backend themselves: with the default
# settings each of them traces a C++ kernel (the probe lists topicjax_estep, _estep_models,
# _lida_sweep, _ptm_estep, _ptm_trials and _ptm_smallest for them), so here they run the XLA
# versions instead.  Not here: tests/core/test_kernels.py (it selects "auto" for every test), the
# kernels' comparisons with the XLA versions (they run both already), and what runs the XLA
# code under every setting -- hypergradients (topicjax.tune.backend always differentiates the
# pure-JAX E-step), TTMM's SGD, the flat layout, LIDA's exact and stale sweeps.
XLA_SUBSET = [
    # E-step against a numpy loop (the sliced layouts: the flat one runs the XLA code under every
    # setting), float64, the per-model vmapped kernel
    "tests/core/test_estep.py::test_kernel_matches_numpy_loop[sliced-one-chunk]",
    "tests/core/test_estep.py::test_kernel_matches_numpy_loop[sliced-many-chunks]",
    "tests/core/test_estep.py::test_kernel_matches_numpy_loop[sliced-narrow-pieces]",
    "tests/core/test_estep.py::test_float64_matches_to_round_off",
    "tests/core/test_estep.py::test_vmapped_kernel_matches_numpy_loop_per_model",
    "tests/core/test_estep.py::test_offline_step_matches_dense_reference",
    # the M-step and EM step: counts, monotone likelihood, autodiff gradient, the donated step's memory
    "tests/core/test_em.py::test_expected_counts_match_loop",
    "tests/core/test_em.py::test_em_monotone_and_distributions",
    "tests/core/test_em.py::test_log_likelihood_gradient_is_autodiff_of_the_plain_formula",
    "tests/core/test_em.py::test_donated_step_holds_no_copy_of_phi_and_theta",
    # the drivers: a fit, and a batch of fits side by side (vmap: the GPU's default mode; the
    # E-step of the batch is the models' kernel, sliced_counts_models)
    "tests/core/test_driver.py::test_run_equals_a_python_loop_of_steps",
    "tests/core/test_driver.py::test_run_many_equals_each_fit_alone[vmap]",
    # LIDA's parallel sweep: counts after every sweep (births, both masks), and AD-LDA's
    # distribution against the enumerated kernel
    "tests/lida/test_lida_sampler.py::test_counts_equal_assignments_after_every_sweep[lida-parallel]",
    "tests/lida/test_lida_stationary.py::test_parallel_lda_chains_match_enumerated_kernel[dense-blocks1-8-2]",
    # PTM: GEM steps (E-step, trial flips, ranking of word switches) never increase the BIC;
    # restarts vmapped in one call (the GPU's default mode) are their seeds' fitted models (BIC
    # against numpy, transform as the separate fit's); their bit-equality with the separate fits
    # (user_compiler) runs below, at XLA's defaults
    "tests/ptm/test_ptm.py::test_gem_never_increases_bic[2014]",
    "tests/ptm/test_ptm.py::test_fit_many_restarts_are_complete_fitted_models",
    # TTMM: the EM step against the explicit posterior, monotone EM
    "tests/ttmm/test_ttmm.py::test_em_step_matches_explicit_q_reference",
    "tests/ttmm/test_ttmm.py::test_em_log_likelihood_is_monotone",
]
# The subset's tests marked ``user_compiler`` (tests/conftest.py): they check what XLA's default
# compiler settings produce, so they run in a child of their own at those settings -- not in the
# quick child, which would set up their fixtures and then run them again at XLA's defaults in a
# grandchild of its own, without the probe.
AT_XLA_DEFAULTS = [
    "tests/core/test_em.py::test_donated_step_holds_no_copy_of_phi_and_theta",
    # the XLA E-step vmapped over restarts against the separate fits, bit for bit: each model of a
    # GPU's fit_many is its separate fit (the suite checks this on the kernel path only)
    "tests/ptm/test_ptm.py::test_fit_many_equals_separate_fits",
]
# Selects the C++ kernels itself (``core_kernels.backend("ffi")``): the probe must see it.
CONTROL = "tests/ptm/test_ptm_kernels.py::test_estep_equals_float64_loop_and_xla[5-3-widths1]"

# Tests whose behaviour depends on the number of local devices.
MULTI_DEVICE = [
    # a sharded fit killed and resumed; its checkpoint records the mesh's size
    "tests/core/test_checkpoint.py::test_a_sharded_fit_resumes_on_its_mesh",
    # run_many's "devices" mode spread over the 4 devices (a copy fills the fourth); its other modes
    # run on the default device whatever the count (topicjax.core.driver.run_many), in the suite
    "tests/core/test_driver.py::test_run_many_equals_each_fit_alone[devices]",
    # the benchmark adds its pass sharded over the devices
    "tests/core/test_estep.py::test_benchmark_quick_smoke_run",
    # the sharded fit over all local devices against ARTM.fit, and its checks
    "tests/scale/test_distributed.py::test_one_device_equals_the_artm_fit",
    "tests/scale/test_distributed.py::test_bad_mesh_and_empty_corpus_are_rejected",
    "tests/test_one_regularizer.py::test_sharded_fit_on_one_device",
    # fit_many in its default mode ("devices" with several CPU devices: 2 models on 4 devices)
    "tests/test_one_regularizer.py::test_fit_many",
]

# The probe: the child's backend settings and device count, and the topicjax FFI targets traced
# by each test (jax.ffi.ffi_call is where every kernel of topicjax enters a JAX program).
PROBE = textwrap.dedent('''
    import json, os
    import pytest

    CALLS, CURRENT = {}, [None]


    def pytest_configure(config):
        import jax

        real = jax.ffi.ffi_call

        def ffi_call(target_name, *args, **kwargs):
            if str(target_name).startswith("topicjax_"):
                CALLS.setdefault(CURRENT[0] or "<outside tests>", set()).add(str(target_name))
            return real(target_name, *args, **kwargs)

        jax.ffi.ffi_call = ffi_call


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        CURRENT[0] = item.nodeid
        yield
        CURRENT[0] = None


    def pytest_unconfigure(config):
        import jax
        from topicjax.core import kernels
        from topicjax.lida import kernel

        with open(os.environ["TOPICJAX_TEST_PROBE"], "w") as f:
            json.dump({"estep": kernels.get_backend(), "lida": kernel.get_backend(),
                       "devices": len(jax.devices()), "platform": jax.default_backend(),
                       "quick_compile": "--xla_backend_optimization_level=0" in os.environ.get("XLA_FLAGS", ""),
                       "ffi": {k: sorted(v) for k, v in CALLS.items()}}, f)
''')


def run_subset(tmp_path: Path, tests: list[str], env_vars: dict, timeout: float = 600):
    """``python -m pytest`` on ``tests`` in a new process with ``env_vars``; returns the probe's
    record and, per test case that ran, its outcome (``passed``, ``skipped``, ``failed``)."""
    (tmp_path / "probe").mkdir(parents=True)
    (tmp_path / "probe" / "topicjax_test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's xdist
    for k in ("TOPICJAX_ESTEP", "TOPICJAX_LIDA", "XLA_FLAGS"):
        env.pop(k, None)
    # TOPICJAX_THREADS=1: what these tests compare is computed in their own process, and a second
    # thread of the compiled kernels, waited for at every call on cores that the suite's other
    # processes hold, costs this run more than it gives (the kernels' results on any number of
    # threads: tests/core/test_kernels.py, tests/lida/test_lida_stationary.py)
    env.update(env_vars, JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1", TOPICJAX_TEST_PROBE=str(tmp_path / "probe.json"),
               PYTHONPATH=os.pathsep.join([str(tmp_path / "probe"), str(ROOT), env.get("PYTHONPATH", "")]))
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "topicjax_test_probe", "-n", "0",
           f"--junitxml={junit}", f"--basetemp={tmp_path / 'tmp'}", *tests]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {c.tag for c in case} & {"skipped", "failure", "error"}
        outcome = "skipped" if kinds == {"skipped"} else "failed" if kinds else "passed"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return json.loads((tmp_path / "probe.json").read_text()), outcomes


def ran(test_id: str, outcomes: dict) -> bool:
    """Whether a test id (a file, a test or one case of it) ran: JUnit names a case
    ``tests.core.test_em::test_x[case]``."""
    path, _, name = test_id.partition("::")
    prefix = path.removesuffix(".py").replace("/", ".") + "::" + name
    return any(case == prefix or case.startswith(prefix + ("[" if name else "")) for case in outcomes)


@pytest.mark.slow
def test_the_xla_paths_pass_a_representative_subset(tmp_path):
    """The subset on the XLA paths: the ``user_compiler`` tests (:data:`AT_XLA_DEFAULTS`) in a
    child at XLA's default compiler settings, the others and the control in a child at the
    suite's quick ones (tests/conftest.py)."""
    control = [CONTROL] if kernels.available() else []
    xla = {"TOPICJAX_ESTEP": "xla", "TOPICJAX_LIDA": "xla"}
    quick = [t for t in XLA_SUBSET if t not in AT_XLA_DEFAULTS] + control
    runs = {"quick": run_subset(tmp_path / "quick", quick, xla),
            # XLA_FLAGS unset (run_subset) and no quick flags added by the child's conftest
            "defaults": run_subset(tmp_path / "defaults", AT_XLA_DEFAULTS, {**xla, "TOPICJAX_TEST_QUICK_COMPILE": "0"})}
    outcomes = {}
    for name, (probe, found) in runs.items():
        assert (probe["estep"], probe["lida"], probe["platform"]) == ("xla", "xla", "cpu"), name
        outcomes.update(found)
    assert runs["defaults"][0]["quick_compile"] is False  # the quick child: as the suite (the caller may set defaults)
    # every listed test ran and passed, none skipped
    assert all(v == "passed" for v in outcomes.values()), {k: v for k, v in outcomes.items() if v != "passed"}
    for test_id in XLA_SUBSET + control:
        assert ran(test_id, outcomes), f"{test_id} did not run"
    # no FFI kernel was traced, except by the control test, which selects it itself
    assert set(runs["quick"][0]["ffi"]) == set(control), runs["quick"][0]["ffi"]
    assert runs["defaults"][0]["ffi"] == {}, runs["defaults"][0]["ffi"]


@pytest.mark.slow
def test_the_multi_device_tests_pass_with_four_host_devices(tmp_path):
    probe, outcomes = run_subset(tmp_path, MULTI_DEVICE, {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert probe["devices"] == 4 and probe["platform"] == "cpu"
    assert all(v == "passed" for v in outcomes.values()), {k: v for k, v in outcomes.items() if v != "passed"}
    for test_id in MULTI_DEVICE:
        assert ran(test_id, outcomes), f"{test_id} did not run"
