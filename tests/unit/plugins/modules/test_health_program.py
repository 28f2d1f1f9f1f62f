"""Unit tests for plugins/modules/health_program.py: idempotent install and removal of the health program's files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.modules.health_program import MANIFEST, absent, present

FILES = {
    "cvs-health": {"content": "#!/usr/bin/python3 -I\n", "mode": "0755"},
    "lib/a/b.py": {"content": "x = 1\n", "mode": "0644"},
    "config.json": {"content": "{}\n", "mode": "0644"},
}


def test_present_writes_once_then_changes_nothing_and_check_mode_writes_nothing(tmp_path: Path) -> None:
    dest = str(tmp_path / "health")
    assert present(dest, FILES, check=True)["written"] == ["config.json", "cvs-health", "lib/a/b.py", MANIFEST]
    assert not (tmp_path / "health").exists()
    assert present(dest, FILES, check=False)["written"] == ["config.json", "cvs-health", "lib/a/b.py", MANIFEST]
    assert (tmp_path / "health/cvs-health").stat().st_mode & 0o777 == 0o755
    assert present(dest, FILES, check=False) == {"written": [], "removed": []}
    (tmp_path / "health/cvs-health").chmod(0o644)
    assert present(dest, FILES, check=False)["written"] == ["cvs-health"], "a changed mode is put back"


def test_a_file_no_longer_shipped_is_removed_and_absent_removes_everything(tmp_path: Path) -> None:
    dest = str(tmp_path / "health")
    present(dest, FILES, check=False)
    (tmp_path / "health/state").mkdir()
    (tmp_path / "health/state/node1.json").write_text("{}")
    fewer = {k: v for k, v in FILES.items() if k != "lib/a/b.py"}
    assert present(dest, fewer, check=False)["removed"] == ["lib/a/b.py"]
    assert json.loads((tmp_path / "health" / MANIFEST).read_text()) == {"files": sorted(fewer)}
    assert absent(dest, check=True)["removed"] == ["config.json", "cvs-health", MANIFEST]
    assert (tmp_path / "health").exists()
    absent(dest, check=False)
    assert not (tmp_path / "health").exists()
    assert absent(dest, check=False) == {"written": [], "removed": []}


def test_a_directory_not_installed_here_is_left_alone_and_paths_stay_inside(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    with pytest.raises(
        ValueError, match=re.escape("holds no .cvs-health-manifest.json: not installed by cvs.cluster.health_program")
    ):
        absent(str(tmp_path / "other"), check=False)
    with pytest.raises(ValueError, match=re.escape("'../x' is outside")):
        present(str(tmp_path / "health"), {"../x": {"content": ""}}, check=False)
