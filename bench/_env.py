# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the benches find things and what they hand on: paths, CVS_BENCH_* knobs, and the environment
every ansible command of a bench runs with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = REPO / ".venv" / "bin"
RESULTS = BENCH / "results"
WORK = RESULTS / "tmp"
GENERATED = REPO / "tests" / "cluster" / "generated"
CALLBACKS = BENCH / "callback_plugins"
# CVS_BENCH_COLLECTIONS: a collections path holding a modified copy of cvs.cluster, searched
# first (for experiments with a candidate change; the checkout is never modified)
EXPERIMENT = os.environ.get("CVS_BENCH_COLLECTIONS")
# short: unix socket paths are limited to 108 bytes
CP_DIR = Path.home() / ".ansible" / "cvsb"
REMOTE_DIR = os.environ.get("CVS_BENCH_REMOTE_DIR", "/var/tmp/cvs-bench")
CONTROL_PERSIST = "900s"
SSH_ARGS = (
    f"-o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST} -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def env_list(name: str, default: Sequence[str]) -> list[str]:
    value = os.environ.get(name)
    return [v.strip() for v in value.split(",") if v.strip()] if value else list(default)


def ansible_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS),
        ANSIBLE_STDOUT_CALLBACK="cvs_bench",
        ANSIBLE_SSH_ARGS=SSH_ARGS,
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_DEPRECATION_WARNINGS="False",
    )
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    if EXPERIMENT:
        env["ANSIBLE_COLLECTIONS_PATH"] = f"{EXPERIMENT}:{REPO / '.cache' / 'collections'}"
    env.update(extra or {})
    return env
