#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: health_program
short_description: Install or remove the node-local health program (cvs-health) checked against a run's baseline
version_added: 0.3.0
description:
  - >-
    Installs in O(dest) the program C(cvs-health), the collection's files it imports (preflight's probe and fact
    reader, the drain-reason and baseline rules, Slurm's output reader: the same code, not a copy), the baseline
    (O(baseline), a C(baseline.json) that a passing validate run wrote) and C(config.json) (O(config)).
  - >-
    C(cvs-health) checks its node against the baseline in a few seconds - kernel, ROCm, amd-smi, driver, firmware
    and RVS versions, GPU model and count, kernel-log error lines since the last check, free space, optionally a
    short GPU test command - and is meant to be Slurm's C(HealthCheckProgram) or a prolog (docs/slurm.md). On a
    problem it drains its own node with C(Reason=cvs: health: ...) and exits 1; healthy, it resumes a node whose
    reason starts with C(cvs: health:) and exits 0; its own error exits 2 and drains only with
    C(drain_on_error). A node an admin (or a validate run) drained is never touched.
  - The baseline is refused, naming the file and the field, when its C(schema) is not 1, when its C(cluster.name)
    is not O(cluster_name), or when it has no entry for O(node).
  - The installed files are the same on every node (the program finds its node by Slurm's or the host's name), so
    O(dest) may be on a shared file system. Idempotent; O(state=absent) removes what was installed (a directory
    without the install's manifest is refused).
  - This is an action plugin; it reads the baseline and the collection's files on the controller and writes them
    on the node.
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  state:
    description: C(present) installs or updates, C(absent) removes.
    type: str
    choices: [present, absent]
    default: present
  dest:
    description: Directory of the program on the node (C(<dest>/cvs-health) is the command to configure).
    type: path
    default: /opt/cvs-health
  baseline:
    description: The C(baseline.json) on the controller; required with O(state=present).
    type: path
  cluster_name:
    description: This inventory's cluster name (C(cvs_cluster_name)); the baseline's must be the same.
    type: str
  node:
    description: This node's name in the baseline. Default C(cvs_node), else C(inventory_hostname).
    type: str
  python:
    description: The Python (>= 3.9) on the nodes that runs the program.
    type: path
    default: /usr/bin/python3
  config:
    description:
      - What the program checks and how it drains (written as C(config.json); see the role
        C(cvs.cluster.health_program) for each key) - C(facts), C(commands), C(env), C(command_timeout),
        C(paths) (C({path, min_free_mb})), C(kernel_log_patterns), C(kernel_log_ignore), C(require_kernel_log),
        C(gpu_test) (argv), C(gpu_test_timeout), C(slurm) (C({enabled, scontrol, conf, timeout})),
        C(drain_on_error), C(reason_max), C(state_dir).
    type: dict
    default: {}
  files:
    description: Internal (filled by the action) - the files to write, relative path to C({content, mode}).
    type: dict
extends_documentation_fragment:
  - cvs.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Says which files would change; writes nothing.
  diff_mode:
    support: full
    description: The files that would be written or removed.
seealso:
  - module: cvs.cluster.quarantine
"""

EXAMPLES = r"""
- name: Install cvs-health with the last passing run's baseline
  cvs.cluster.health_program:
    baseline: /var/tmp/cvs-results/20261207-220000-abcdef/baseline.json
    config:
      paths: [{path: /var/tmp, min_free_mb: 1024}]
  become: true
"""

RETURN = r"""
program:
  description: The command to configure as HealthCheckProgram.
  returned: state=present
  type: str
  sample: /opt/cvs-health/cvs-health
written:
  description: Files written (or that would be), relative to O(dest).
  returned: always
  type: list
  elements: str
removed:
  description: Files removed (or that would be), relative to O(dest).
  returned: always
  type: list
  elements: str
"""

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

MANIFEST = ".cvs-health-manifest.json"
ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "dest": {"type": "path", "default": "/opt/cvs-health"},
    "baseline": {"type": "path"},
    "cluster_name": {"type": "str"},
    "node": {"type": "str"},
    "python": {"type": "path", "default": "/usr/bin/python3"},
    "config": {"type": "dict", "default": {}},
    "files": {"type": "dict"},
}


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write(path: str, data: bytes, mode: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _manifest(dest: str) -> list[str] | None:
    data = _read(os.path.join(dest, MANIFEST))
    if data is None:
        return None
    try:
        files = json.loads(data.decode("utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        return None
    return [str(f) for f in files]


def _inside(dest: str, rel: str) -> str:
    path = os.path.normpath(os.path.join(dest, rel))
    if not path.startswith(dest.rstrip("/") + "/"):
        raise ValueError(f"{rel!r} is outside {dest}")
    return path


def present(dest: str, files: dict[str, Any], check: bool) -> dict[str, Any]:
    written, removed = [], []
    old = _manifest(dest) or []
    for rel, spec in sorted(files.items()):
        path = _inside(dest, rel)
        data = str(spec["content"]).encode("utf-8")
        mode = int(str(spec.get("mode", "0644")), 8)
        current = _read(path)
        same_mode = current is not None and (os.stat(path).st_mode & 0o7777) == mode
        if current != data or not same_mode:
            written.append(rel)
            if not check:
                _write(path, data, mode)
    for rel in sorted(set(old) - set(files)):
        path = _inside(dest, rel)
        if os.path.lexists(path):
            removed.append(rel)
            if not check:
                with contextlib.suppress(FileNotFoundError):  # another node sharing dest removed it
                    os.unlink(path)
    manifest = json.dumps({"files": sorted(files)}, indent=1).encode("utf-8")
    if _read(os.path.join(dest, MANIFEST)) != manifest:
        written.append(MANIFEST)
        if not check:
            _write(os.path.join(dest, MANIFEST), manifest, 0o644)
    return {"written": written, "removed": removed}


def absent(dest: str, check: bool) -> dict[str, Any]:
    if not os.path.exists(dest):
        return {"written": [], "removed": []}
    files = _manifest(dest)
    if files is None:
        raise ValueError(
            f"{dest} exists but holds no {MANIFEST}: not installed by cvs.cluster.health_program, left alone"
        )
    removed = [rel for rel in files if os.path.lexists(_inside(dest, rel))] + [MANIFEST]
    if not check:

        def gone(_function: Any, _path: str, excinfo: Any) -> None:
            if not isinstance(excinfo[1], FileNotFoundError):  # another node sharing dest got there first
                raise excinfo[1]

        shutil.rmtree(dest, onerror=gone)  # pylint: disable=deprecated-argument
    return {"written": [], "removed": removed}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    dest = os.path.abspath(module.params["dest"])
    try:
        if module.params["state"] == "present":
            if not module.params["files"]:
                module.fail_json(msg="cvs.cluster.health_program runs through its action plugin, which fills files")
            done = present(dest, module.params["files"], module.check_mode)
            done["program"] = os.path.join(dest, "cvs-health")
        else:
            done = absent(dest, module.check_mode)
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"{dest}: {exc}")
    changed = bool(done["written"] or done["removed"])
    diff = {
        "before": "".join(f"{dest}/{r}\n" for r in done["removed"]),
        "after": "".join(f"{dest}/{r}\n" for r in done["written"]),
    }
    module.exit_json(changed=changed, diff=diff, **done)


if __name__ == "__main__":
    main()
