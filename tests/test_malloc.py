"""topicjax._malloc: one glibc malloc arena, unless the user's MALLOC_ARENA_MAX or TOPICJAX_MALLOC_ARENAS rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CODE = "import topicjax._malloc as m, sys; sys.stdout.write(str(m.limit_arenas()))"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize("setting, applied", [(None, "True"), ("", "True"), ("4", "False")])
def test_limit_arenas_leaves_a_users_setting(setting, applied):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MALLOC_ARENA_MAX", None)
    if setting is not None:
        env["MALLOC_ARENA_MAX"] = setting
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == applied


def run_child(code: str, **variables) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("MALLOC_ARENA_MAX", "TOPICJAX_MALLOC_ARENAS"):
        env.pop(name, None)
    env.update(variables)
    return subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize("setting, applied, arenas", [
    ("", "True", "1"), ("off", "False", "None"), ("OFF", "False", "None"), ("0", "False", "None"),
    ("none", "False", "None"), ("3", "True", "3"), (" 2 ", "True", "2")])
def test_topicjax_malloc_arenas_sets_or_turns_off_the_limit(setting, applied, arenas):
    code = "import topicjax._malloc as m, sys; sys.stdout.write(f'{m.limit_arenas()} {m.arena_setting()}')"
    out = run_child(code, TOPICJAX_MALLOC_ARENAS=setting)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{applied} {arenas}" and out.stderr == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize("setting", ["many", "-1", "1.5"])
def test_a_bad_setting_warns_at_import_and_sets_nothing(setting):
    code = ("import topicjax, topicjax._malloc as m, sys\n"
            "try:\n    m.arena_setting()\nexcept ValueError as e:\n    sys.stdout.write(str(e))")
    out = run_child(code, TOPICJAX_MALLOC_ARENAS=setting)
    assert out.returncode == 0, out.stderr  # import topicjax never fails on a setting
    message = f"TOPICJAX_MALLOC_ARENAS must be an integer >= 1 or 'off', got {setting!r}"
    assert out.stdout == message
    assert "RuntimeWarning" in out.stderr and message in out.stderr and "left at its default" in out.stderr


def test_glibc_variable_rules_over_topicjax_variable():
    out = run_child(CODE, MALLOC_ARENA_MAX="4", TOPICJAX_MALLOC_ARENAS="2")
    assert out.returncode == 0 and out.stdout == "False"
