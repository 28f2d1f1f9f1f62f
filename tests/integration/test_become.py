"""Baremetal as a non-root SSH user: become with a password, and nodes without escalation named up front.

A user with a password-protected sudo on node1 and node2 only (sudoers Host_List; /etc is shared by the simulated
nodes, their host names differ). Ansible's own become (method sudo, password from ansible_become_password) is what
the collection uses, so --ask-become-pass and a vault work the same way.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

USER = "cvsbecome"
PASSWORD = "Cvs-become-4711"
SUDOERS = Path("/etc/sudoers.d/cvs-become-test")
PLAYBOOK = "playbooks/health_rvs.yml"


def _sh(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def sudo_user(cluster: Any) -> Iterator[Path]:
    """The user, its key login and its sudo rule; yields a baremetal inventory that logs in as it."""
    pub = Path(cluster.inventory("baremetal")).parent / "id_ed25519.pub"
    subprocess.run(["userdel", "-r", USER], capture_output=True, check=False)
    _sh(["useradd", "-m", "-d", f"/home/{USER}", "-s", "/bin/bash", USER])
    _sh(["chpasswd"], input=f"{USER}:{PASSWORD}\n")
    ssh = Path(f"/home/{USER}/.ssh")
    ssh.mkdir(mode=0o700, exist_ok=True)
    (ssh / "authorized_keys").write_text(pub.read_text())
    _sh(["chown", "-R", f"{USER}:{USER}", str(ssh)])
    (ssh / "authorized_keys").chmod(0o600)
    SUDOERS.write_text(f"{USER} node1,node2 = (ALL) ALL\n")
    SUDOERS.chmod(0o440)
    _sh(["visudo", "-cf", str(SUDOERS)])
    inventory = yaml.safe_load(Path(cluster.inventory("baremetal")).read_text())
    inventory["all"]["vars"]["ansible_user"] = USER
    path = Path(f"/home/{USER}") / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    yield path
    SUDOERS.unlink(missing_ok=True)
    subprocess.run(["userdel", "-r", USER], capture_output=True, check=False)


def _checks(results: Path) -> dict[str, dict[str, Any]]:
    (run,) = [p for p in results.iterdir() if (p / "checks").is_dir()]
    return {p.name: json.loads((p / "rvs.json").read_text()) for p in sorted((run / "checks").iterdir())}


def test_become_password_runs_rvs(run_playbook: Callable[..., Any], sudo_user: Path, tmp_path: Path) -> None:
    proc = run_playbook(
        PLAYBOOK,
        sudo_user,
        {"cvs_results_dir": str(tmp_path), "rvs_poll_interval": 1, "ansible_become_password": PASSWORD},
        args=["--limit", "node1,node2,localhost"],
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    checks = _checks(tmp_path)
    assert sorted(checks) == ["node1", "node2"]
    assert all(c["status"] == "PASS" for c in checks.values()), checks
    assert PASSWORD not in out


@pytest.mark.parametrize("password", [PASSWORD, None], ids=["node3-not-in-sudoers", "no-password"])
def test_nodes_without_escalation_are_named_before_anything_starts(
    run_playbook: Callable[..., Any], sudo_user: Path, tmp_path: Path, password: Any
) -> None:
    extravars: dict[str, Any] = {"cvs_results_dir": str(tmp_path)}
    if password:
        extravars["ansible_become_password"] = password
    proc = run_playbook(PLAYBOOK, sudo_user, extravars, check=False)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert "the baremetal backend needs root on every node" in out
    named = out[out.index("It does not work on:") :]
    if password:
        assert "node3 (" in named and "node1 (" not in named and "node2 (" not in named, named[:600]
    else:
        for node in ("node1", "node2", "node3"):
            assert f"{node} (" in named, named[:600]
        assert "password" in named.lower()
    assert "PLAY [Run the ROCm Validation Suite]" not in out
    assert PASSWORD not in out
