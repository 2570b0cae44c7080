"""The environment variables topicjax reads (``topicjax.core.environment``): each refused with the
parameters' message shape where it is read, never at import; the command line reports them as one
line; more kernel threads than cores warn once and still run."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from topicjax.cli import main
from topicjax.core import environment, kernels
from topicjax.lida import kernel as lida_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (variable, bad value, the message)
BAD = [
    ("TOPICJAX_BUCKETS", "yes", "TOPICJAX_BUCKETS must be one of 'on', 'off', '1', '0', got 'yes'"),
    ("TOPICJAX_THREADS", "0", "TOPICJAX_THREADS must be an integer in [1, 4096], got '0'"),
    ("TOPICJAX_THREADS", "-1", "TOPICJAX_THREADS must be an integer in [1, 4096], got '-1'"),
    ("TOPICJAX_THREADS", "abc", "TOPICJAX_THREADS must be an integer in [1, 4096], got 'abc'"),
    ("TOPICJAX_THREADS", "2.5", "TOPICJAX_THREADS must be an integer in [1, 4096], got '2.5'"),
    ("TOPICJAX_THREADS", "5000", "TOPICJAX_THREADS must be an integer in [1, 4096], got '5000'"),
    ("TOPICJAX_ESTEP", "fast", "TOPICJAX_ESTEP must be one of 'auto', 'xla', 'ffi', 'xla_scatter', got 'fast'"),
    ("TOPICJAX_LIDA", "gpu", "TOPICJAX_LIDA must be one of 'auto', 'xla', 'ffi', 'pallas', got 'gpu'"),
    ("TOPICJAX_LIDA_MEMORY", "lots",
     "TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), got 'lots'"),
    ("TOPICJAX_LIDA_MEMORY", "inf",
     "TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), got 'inf'"),
    ("TOPICJAX_LIDA_MEMORY", "-5",
     "TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), got '-5'"),
    ("TOPICJAX_LIDA_MEMORY", "1e999",
     "TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), got '1e999'"),
    ("TOPICJAX_LIDA_MEMORY", "8 GB of RAM",
     "TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), got '8 GB of RAM'"),
    ("XLA_FLAGS", "--xla_force_host_platform_device_count=abc",
     "XLA_FLAGS --xla_force_host_platform_device_count must be an integer >= 1, got 'abc'"),
    ("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true --xla_force_host_platform_device_count=0",
     "XLA_FLAGS --xla_force_host_platform_device_count must be an integer >= 1, got '0'"),
]


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("TOPICJAX_THREADS", "TOPICJAX_ESTEP", "TOPICJAX_LIDA", "TOPICJAX_LIDA_MEMORY", "TOPICJAX_DATA",
                 "TOPICJAX_BUCKETS", "XLA_FLAGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOPICJAX_CACHE", "off")  # its own tests: tests/core/test_cache.py
    return monkeypatch


@pytest.mark.parametrize("name, value, message", BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_bad_settings_are_refused_with_the_parameters_message(clean_env, name, value, message):
    clean_env.setenv(name, value)
    with pytest.raises(ValueError) as e:
        environment.check()
    assert str(e.value) == message


@pytest.mark.parametrize("name, value, message", BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_the_command_line_reports_a_bad_setting_in_one_line(clean_env, capsys, tmp_path, name, value, message):
    clean_env.setenv(name, value)
    assert main(["topics", str(tmp_path / "no-model")]) == 1
    err = capsys.readouterr().err
    assert err == f"topicjax: error: {message}\n"


def test_good_settings_are_read(clean_env, tmp_path):
    assert environment.check() == {"TOPICJAX_THREADS": None, "TOPICJAX_ESTEP": "auto", "TOPICJAX_LIDA": "auto",
                                   "TOPICJAX_LIDA_MEMORY": None, "TOPICJAX_BUCKETS": True,
                                   "XLA_FLAGS device count": None, "TOPICJAX_CACHE": None}
    for name, value, expected in [
        ("TOPICJAX_THREADS", " 1 ", 1), ("TOPICJAX_ESTEP", "XLA", "xla"), ("TOPICJAX_LIDA", "Ffi", "ffi"),
        ("TOPICJAX_LIDA_MEMORY", "8e9", 8_000_000_000), ("TOPICJAX_LIDA_MEMORY", "16G", 16 << 30),
        ("TOPICJAX_LIDA_MEMORY", "1.5 GiB", 3 << 29), ("TOPICJAX_LIDA_MEMORY", "512MB", 512 << 20),
        ("XLA_FLAGS", "--xla_force_host_platform_device_count=4 --xla_foo=1", 4),
        ("TOPICJAX_BUCKETS", "OFF", False), ("TOPICJAX_BUCKETS", " 0 ", False), ("TOPICJAX_BUCKETS", "on", True),
    ]:
        clean_env.setenv(name, value)
        key = "XLA_FLAGS device count" if name == "XLA_FLAGS" else name
        assert environment.check()[key] == expected, (name, value)
        clean_env.delenv(name)
    clean_env.setenv("TOPICJAX_ESTEP", "   ")  # blank counts as unset
    assert environment.backend_setting("TOPICJAX_ESTEP") == "auto"
    clean_env.setenv("TOPICJAX_DATA", str(tmp_path))
    assert environment.data_dir() == tmp_path


def test_data_folder_is_checked_when_read(clean_env, tmp_path):
    from topicjax.data.datasets import shared_data_dir

    (tmp_path / "a-file").write_text("x")
    for bad in (tmp_path / "missing", tmp_path / "a-file"):
        clean_env.setenv("TOPICJAX_DATA", str(bad))
        with pytest.raises(FileNotFoundError) as e:
            shared_data_dir()
        assert str(e.value) == f"TOPICJAX_DATA must be an existing folder, got {str(bad)!r}"


def test_backends_are_read_on_first_use(clean_env):
    """The E-step and LIDA backends read their variables when first asked, not at import."""
    clean_env.setattr(kernels, "_BACKEND", None)
    clean_env.setitem(lida_kernel._STATE, "backend", None)
    clean_env.setenv("TOPICJAX_ESTEP", "fast")
    clean_env.setenv("TOPICJAX_LIDA", "gpu")
    with pytest.raises(ValueError, match=r"^TOPICJAX_ESTEP must be one of 'auto', 'xla', 'ffi', 'xla_scatter', got 'fast'$"):
        kernels.get_backend()
    with pytest.raises(ValueError, match=r"^TOPICJAX_LIDA must be one of 'auto', 'xla', 'ffi', 'pallas', got 'gpu'$"):
        lida_kernel.get_backend()
    clean_env.setenv("TOPICJAX_ESTEP", "xla")
    clean_env.setenv("TOPICJAX_LIDA", "XLA")
    assert kernels.get_backend() == "xla" and lida_kernel.get_backend() == "xla"


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOPICJAX_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**full, "JAX_PLATFORMS": "cpu", **env})


def test_bad_settings_do_not_break_the_import_and_the_command_one_line():
    """Issue 26: TOPICJAX_THREADS=0, -1 or abc gave a traceback at import, before the command
    line's error handling."""
    env = dict(TOPICJAX_THREADS="abc", TOPICJAX_ESTEP="fast", TOPICJAX_LIDA="gpu", TOPICJAX_LIDA_MEMORY="lots")
    # one interpreter: the imports print "imported" (nothing on stderr), then the command runs
    out = _run("import sys, topicjax, topicjax.cli, topicjax.lida.kernel; print('imported', flush=True); "
               "from topicjax.cli import main; sys.exit(main(['topics', 'no-such-model']))", **env)
    assert out.stdout.strip() == "imported", out.stderr
    assert out.returncode == 1
    assert out.stderr == "topicjax: error: TOPICJAX_THREADS must be an integer in [1, 4096], got 'abc'\n"


@pytest.mark.skipif(not kernels.available(), reason="the compiled kernels are not built")
def test_more_threads_than_cores_warn_once_and_run(clean_env):
    """Issue 26: TOPICJAX_THREADS=1000 ran 4.3x slower without a word."""
    cores = environment.usable_cores()
    code = f"""
import warnings, numpy as np, topicjax as tj
from topicjax.core import kernels
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
    model = tj.PLSA(4, max_iter=3, progress=False).fit(corpus)
    kernels.set_threads({cores + 3})
    tj.PLSA(4, max_iter=3, progress=False).fit(corpus)
print(kernels.get_threads(), np.isfinite(model.phi_).all())
for w in caught:
    if "cores" in str(w.message):
        print(w.category.__name__, w.message)
"""
    out = _run(code, TOPICJAX_THREADS=str(cores + 2))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == f"{cores + 3} True"
    assert lines[1:] == [f"RuntimeWarning TOPICJAX_THREADS = {cores + 2} is more than the {cores} cores this process "
                         f"may run on (os.sched_getaffinity); the compiled kernels run slower with more threads than "
                         f"cores (using {cores + 2} anyway; {cores} is the default)"]


def test_the_command_line_shows_the_threads_warning(clean_env, capsys, tmp_path):
    clean_env.setattr(environment, "_WARNED", set())
    cores = environment.usable_cores()
    clean_env.setenv("TOPICJAX_THREADS", "1000")
    assert main(["topics", str(tmp_path / "no-model")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"topicjax: warning: TOPICJAX_THREADS = 1000 is more than the {cores} cores this process may "
                      f"run on (os.sched_getaffinity); the compiled kernels run slower with more threads than cores "
                      f"(using 1000 anyway; {cores} is the default)")
    assert err[1].startswith("topicjax: error: ") and len(err) == 2


@pytest.mark.skipif(not kernels.available(), reason="the compiled kernels are not built")
def test_set_threads_above_the_cores_warns_once(clean_env):
    clean_env.setattr(environment, "_WARNED", set())
    cores = environment.usable_cores()
    old = kernels.get_threads()
    try:
        with pytest.warns(RuntimeWarning, match=rf"^the number of threads = {cores + 1} is more than the {cores} cores"):
            kernels.set_threads(cores + 1)
        assert kernels.get_threads() == cores + 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernels.set_threads(cores + 2)  # once per process
            kernels.set_threads(1)
        with pytest.raises(ValueError, match=r"^the number of threads must be a positive integer <= 4096, got 4097$"):
            kernels.set_threads(4097)
    finally:
        kernels.set_threads(old)


def test_native_build_setting_is_checked(tmp_path):
    out = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
                          "--build-temp", str(tmp_path / "tmp")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "TOPICJAX_NATIVE": "yes"}, timeout=300)
    assert out.returncode != 0
    assert "error: TOPICJAX_NATIVE must be one of '0', '1', got 'yes'" in out.stderr.splitlines()
    assert not (tmp_path / "lib").exists() and not (tmp_path / "tmp").exists()  # stopped before compiling
