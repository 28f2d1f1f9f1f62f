"""Default controller results directory (plugin_utils/_run/results_dir.py, lookup cvs.cluster.results_dir)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.results_dir import default_results_dir


def _collection(tmp_path: Path, marker: str) -> Path:
    root = tmp_path / "ansible_collections" / "cvs" / "cluster"
    (root / "playbooks").mkdir(parents=True)
    (root / marker).write_text("{}\n")
    return root


def test_environment_variable_wins(tmp_path: Path) -> None:
    root = _collection(tmp_path, "MANIFEST.json")
    env = {"CVS_RESULTS_DIR": str(tmp_path / "mine"), "AWX_ISOLATED_DATA_DIR": str(tmp_path / "art")}
    assert default_results_dir(str(root / "playbooks"), env, str(tmp_path)) == str(tmp_path / "mine")


def test_runner_artifacts_before_any_playbook_rule(tmp_path: Path) -> None:
    root = _collection(tmp_path, "galaxy.yml")
    env = {"AWX_ISOLATED_DATA_DIR": str(tmp_path / "artifacts" / "job-7")}
    got = default_results_dir(str(root / "playbooks"), env, str(tmp_path))
    assert got == str(tmp_path / "artifacts" / "job-7" / "cvs-results")


def test_installed_collection_writes_to_the_working_directory_not_into_itself(tmp_path: Path) -> None:
    root = _collection(tmp_path, "MANIFEST.json")
    cwd = tmp_path / "work"
    got = default_results_dir(str(root / "playbooks"), {}, str(cwd))
    assert got == str(cwd / "cvs-results")
    assert not got.startswith(str(root))


def test_source_checkout_uses_its_ignored_results_folder_from_any_depth(tmp_path: Path) -> None:
    root = _collection(tmp_path, "galaxy.yml")
    nested = root / "examples" / "inference"
    nested.mkdir(parents=True)
    for playbook_dir in (root / "playbooks", nested):
        assert default_results_dir(str(playbook_dir), {}, "/") == str(root / "results")


def test_other_playbooks_keep_the_sibling_results_folder(tmp_path: Path) -> None:
    project = tmp_path / "project" / "playbooks"
    project.mkdir(parents=True)
    assert default_results_dir(str(project), {}, "/") == str(tmp_path / "project" / "results")
    assert default_results_dir(None, {}, str(project)) == str(tmp_path / "project" / "results")
