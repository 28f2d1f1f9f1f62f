"""cluster_json values: plain in ansible-inventory (as AWX imports them), template syntax never rendered.

Pure logic of plugin_utils/_inventory/trust.py, then the real ansible-inventory and ansible commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.trust import (
    has_template_syntax,
    trusted_data,
)

REPO = Path(__file__).resolve().parents[5]
BIN = Path(sys.executable).parent


class Marked(str):
    """Stands for a trusted string in the pure tests."""


def test_every_plain_string_is_trusted_at_any_depth() -> None:
    value = {"a": ["x", {"b": "y"}], "n": 3, "f": False, "none": None}
    out = trusted_data(value, trust=Marked)
    assert isinstance(out["a"][0], Marked) and isinstance(out["a"][1]["b"], Marked)
    assert all(isinstance(k, Marked) for k in out)
    assert out["n"] == 3 and out["f"] is False and out["none"] is None


def test_strings_with_template_syntax_stay_untrusted() -> None:
    for text in ("{{ lookup('pipe', 'id') }}", "a{% if 1 %}b{% endif %}", "{# c #}"):
        assert has_template_syntax(text)
        assert not isinstance(trusted_data(text, trust=Marked), Marked)
    # CVS placeholders are single braces, not templates
    assert not has_template_syntax("/home/{user-id}/.ssh/id_rsa")


def _cluster_file(tmp_path: Path, marker: Path) -> Path:
    data: dict[str, Any] = {
        "username": "svc",
        "priv_key_file": "/home/svc/.ssh/id_rsa",
        "env_vars": {"PATH": "/opt/rocm/bin:$PATH", "EVIL": "{{ lookup('pipe', 'touch " + str(marker) + "') }}"},
        "node_dict": {"192.0.2.11": {"vpc_ip": "198.51.100.11"}, "192.0.2.12": {"vpc_ip": "NA"}},
    }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "default"}


def _unsafe_values(node: Any) -> list[Any]:
    if isinstance(node, dict):
        if set(node) == {"__ansible_unsafe"}:
            return [node["__ansible_unsafe"]]
        return [v for child in node.values() for v in _unsafe_values(child)]
    if isinstance(node, list):
        return [v for child in node for v in _unsafe_values(child)]
    return []


def test_ansible_inventory_list_and_export_print_plain_values(tmp_path: Path) -> None:
    path = _cluster_file(tmp_path, tmp_path / "never")
    evil = "{{ lookup('pipe', 'touch " + str(tmp_path / "never") + "') }}"
    for flags in (["--list"], ["--list", "--export"], ["--host", "192.0.2.11"]):
        proc = subprocess.run(
            [str(BIN / "ansible-inventory"), "-i", str(path), *flags],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=REPO,
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        if flags[0] == "--list":
            # the one value with template syntax is the only one still marked unsafe
            assert set(_unsafe_values(data)) == {evil}, (flags, proc.stdout)
        else:
            assert _unsafe_values(data) == [], (flags, proc.stdout)
            assert data["ansible_host"] == "192.0.2.11"
            assert data["cvs_vpc_ip"] == "198.51.100.11"
            assert data["ansible_user"] == "svc"
            assert data["cvs_env"]["PATH"] == "/opt/rocm/bin:$PATH"


def test_template_syntax_in_a_cluster_file_is_never_rendered(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = _cluster_file(tmp_path, marker)
    argv = [str(BIN / "ansible"), "cvs_nodes", "-i", str(path), "-c", "local", "-m", "ansible.builtin.debug"]
    proc = subprocess.run(
        [*argv, "-a", "msg={{ cvs_env.EVIL }}"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lookup('pipe'" in proc.stdout
    assert not marker.exists(), "a template in the cluster file ran on the controller"
