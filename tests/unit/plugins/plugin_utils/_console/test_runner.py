"""Which callback ansible-runner's wrapper gets when the console is chosen in ansible.cfg (_console/runner.py)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.cvs.cluster.plugins.plugin_utils._console.runner import (
    configured_stdout_callback,
    wrapped_callback,
)


def _cfg(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ansible.cfg"
    path.write_text(text)
    return str(path)


def test_ini_callback_is_handed_to_the_runner_wrapper(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "[defaults]\nstdout_callback = cvs.cluster.cvs  # the console\nforks = 5\n")
    assert configured_stdout_callback(cfg) == "cvs.cluster.cvs"
    assert wrapped_callback({"ANSIBLE_STDOUT_CALLBACK": "awx_display"}, cfg) == "cvs.cluster.cvs"


def test_environment_choice_or_no_runner_leaves_everything_alone(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "[defaults]\nstdout_callback = cvs.cluster.cvs\n")
    env = {"ANSIBLE_STDOUT_CALLBACK": "awx_display", "ORIGINAL_STDOUT_CALLBACK": "yaml"}
    assert wrapped_callback(env, cfg) is None
    assert wrapped_callback({"ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs"}, cfg) is None
    assert wrapped_callback({}, cfg) is None


def test_missing_broken_or_silent_config_gives_nothing(tmp_path: Path) -> None:
    runner = {"ANSIBLE_STDOUT_CALLBACK": "awx_display"}
    assert wrapped_callback(runner, None) is None
    assert wrapped_callback(runner, str(tmp_path / "absent.cfg")) is None
    assert wrapped_callback(runner, _cfg(tmp_path, "no section header\n")) is None
    assert wrapped_callback(runner, _cfg(tmp_path, "[defaults]\nforks = 5\n")) is None
    assert wrapped_callback(runner, _cfg(tmp_path, "[defaults]\nstdout_callback = awx_display\n")) is None
