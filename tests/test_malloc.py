"""topicjax._malloc: one glibc malloc arena, unless the user's MALLOC_ARENA_MAX rules."""

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
