# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the action cvs.cluster.health_program installs on a node: the launcher, the collection's files the health
program imports (health.py's SHIPPED, read from this collection), the checked baseline and config.json.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine import baseline as baseline_rules
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.health import SHIPPED

#: the collection root (this file is plugins/plugin_utils/_quarantine/install.py)
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LIB = "lib/ansible_collections/cvs/cluster"
CONFIG_KEYS = {
    "facts",
    "commands",
    "env",
    "command_timeout",
    "paths",
    "kernel_log_patterns",
    "kernel_log_ignore",
    "require_kernel_log",
    "gpu_test",
    "gpu_test_timeout",
    "slurm",
    "drain_on_error",
    "reason_max",
    "state_dir",
}

LAUNCHER = """#!{python} -I
# cvs-health: checks this node against the baseline of the last passing cvs.cluster run (installed by the role
# cvs.cluster.health_program; see docs/slurm.md). Exit 0 healthy, 1 unhealthy (the node is drained), 2 an error of
# the program itself.
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.health import main  # noqa: E402

main(HERE)
"""


class InstallError(ValueError):
    """Input the install cannot use (the message names it)."""


def read_baseline(path: str, cluster_name: Optional[str], node: str) -> dict[str, Any]:
    """The baseline at ``path`` on the controller, refused (naming the file and the field) unless it is a schema-1
    baseline of this cluster with an entry for ``node``."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InstallError(f"baseline {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise InstallError(f"baseline {path}: not JSON ({exc})") from exc
    try:
        return baseline_rules.check(data, path, cluster_name, [node])
    except baseline_rules.BaselineError as exc:
        raise InstallError(str(exc)) from exc


def files(
    baseline: Mapping[str, Any],
    config: Mapping[str, Any],
    cluster_name: Optional[str],
    python: str,
    root: str = COLLECTION_ROOT,
) -> dict[str, dict[str, str]]:
    """Relative path to ``{content, mode}`` of everything installed (the same on every node)."""
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise InstallError(f"config: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(CONFIG_KEYS))}")
    if not python.startswith("/") or any(c.isspace() for c in python):
        raise InstallError(f"python: {python!r} must be an absolute path without spaces (the launcher's #! line)")
    out: dict[str, dict[str, str]] = {}
    for rel in SHIPPED:
        with open(os.path.join(root, rel), encoding="utf-8") as handle:
            out[f"{LIB}/{rel}"] = {"content": handle.read(), "mode": "0644"}
    out["cvs-health"] = {"content": LAUNCHER.format(python=python), "mode": "0755"}
    out["baseline.json"] = {"content": json.dumps(baseline, indent=1, sort_keys=True) + "\n", "mode": "0644"}
    full = {**dict(config), "baseline": "baseline.json", "cluster_name": cluster_name or None}
    out["config.json"] = {"content": json.dumps(full, indent=1, sort_keys=True) + "\n", "mode": "0644"}
    return out
