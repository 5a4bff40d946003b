"""The allocator settings nsysan makes on import (nsysan/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys

SHOW = "import os, nsysan; print(os.environ['_RJEM_MALLOC_CONF'])"


def _conf_after_import(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_import_sets_decay_and_one_arena_per_cpu() -> None:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    settings = dict(item.split(":") for item in _conf_after_import(env).split(","))
    assert settings["dirty_decay_ms"] == "1000"
    assert settings["muzzy_decay_ms"] == "1000"
    assert settings["background_thread"] == "true"
    assert settings["narenas"] == str(os.cpu_count() or 1)


def test_a_value_the_user_set_is_kept() -> None:
    env = {**os.environ, "_RJEM_MALLOC_CONF": "narenas:3"}
    assert _conf_after_import(env) == "narenas:3"
