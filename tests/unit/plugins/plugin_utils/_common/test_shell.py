"""Unit tests of plugin_utils/_common/shell.py (quoting, comment text, environment names) and of the MaxText role's
shell templates rendered with hostile values (a local ansible-playbook; no node, no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.cvs.cluster.plugins.filter.shell import env_names, shell_comment
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.shell import (
    COMMENT_MAX,
    EnvNameError,
    comment_text,
    env_name_problems,
    quote,
    quote_all,
    valid_env_names,
)

ROOT = Path(__file__).resolve().parents[5]
ANSIBLE_PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
FQDN_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


def hostile(tmp: Path) -> list[str]:
    """Values that run `touch <tmp>/pwned-N` when a shell evaluates them instead of taking them as data."""
    p = tmp / "pwned"
    return [
        f"$(touch {p}-1)",
        f"`touch {p}-2`",
        f"x; touch {p}-3",
        f"x' ; touch {p}-4 ; '",
        f'x" ; touch {p}-5 ; "',
        f"x\ntouch {p}-6\n",
        f"${{IFS}}$(touch${{IFS}}{p}-7)",
        f"x && touch {p}-8 || touch {p}-9 | cat > {p}-10 &",
        "-n",
        "",
        "a\\b\\\\c",
        "ünïcödé ✓",
        "bytes \udcff\udcfe",  # undecodable bytes, as Ansible's surrogateescape reading keeps them
        FQDN_253,
    ]


def bash(script: str, env: dict[str, str] | None = None) -> bytes:
    proc = subprocess.run(
        ["bash", "-c", script.encode("utf-8", "surrogateescape")], capture_output=True, env=env, check=True, timeout=30
    )
    return proc.stdout


# ----------------------------------------------------------------------------- quote


def test_quote_round_trips_every_value_through_bash(tmp_path: Path) -> None:
    for value in hostile(tmp_path):
        out = bash(f'x={quote(value)}\nprintf %s "$x"')
        assert out.decode("utf-8", "surrogateescape") == value
    assert list(tmp_path.iterdir()) == [], "a quoted value ran as code"


def test_quote_all_is_one_argv(tmp_path: Path) -> None:
    values = hostile(tmp_path)
    out = bash(f"args=({quote_all(values)})\nprintf '%s\\0' \"${{args[@]}}\"")
    assert out.decode("utf-8", "surrogateescape").split("\0")[:-1] == values
    assert list(tmp_path.iterdir()) == []


def test_quote_of_non_strings() -> None:
    assert quote(None) == "''"
    assert quote(True) == "true" and quote(False) == "false"
    assert quote(8) == "8"
    assert quote(b"a b") == "'a b'"


# ----------------------------------------------------------------------------- comment_text


def test_comment_text_is_one_printable_line(tmp_path: Path) -> None:
    for value in [*hostile(tmp_path), "a\rb", "a\x1b[2Jb", "a\u2028b\u2029c\x85d", "tab\there", "\x00nul"]:
        text = comment_text(value)
        assert "\n" not in text and "\r" not in text
        assert all(c.isprintable() for c in text), repr(text)
        # as the rest of a comment line, bash runs none of it
        bash(f"# {text}\ntrue")
    assert list(tmp_path.iterdir()) == []
    assert comment_text("gpu01\ntouch /tmp/x") == "gpu01?touch /tmp/x"
    assert comment_text("bytes \udcff") == "bytes ?"
    assert comment_text(None) == ""


def test_comment_text_keeps_a_253_character_name_and_cuts_longer_text() -> None:
    assert comment_text(FQDN_253) == FQDN_253
    long = "x" * (COMMENT_MAX + 50)
    cut = comment_text(long)
    assert len(cut) == COMMENT_MAX and cut.endswith("...")
    assert shell_comment("a\nb") == "a?b"


# ----------------------------------------------------------------------------- env names


@pytest.mark.parametrize("name", ["PATH", "_X", "a1", "NCCL_IB_HCA", "x" * 300])
def test_valid_env_names_pass(name: str) -> None:
    assert env_name_problems({name: "v"}, "f") == []
    assert valid_env_names({name: "v"}, "f") == {name: "v"}


@pytest.mark.parametrize(
    "name",
    ["", "1X", "A-B", "A B", "A;touch /tmp/x", "-S touch /tmp/x", "A=B", "A\n", "\nA", "Ä", "$(x)", "A\x00", 5],
)
def test_invalid_env_names_are_named(name: object) -> None:
    problems = env_name_problems({name: "v", "GOOD": "v"}, "maxtext_env")
    assert len(problems) == 1
    assert problems[0].startswith("maxtext_env: '") and "is not an environment variable name" in problems[0]
    assert "\n" not in problems[0]
    with pytest.raises(EnvNameError, match="maxtext_env: '"):
        valid_env_names({name: "v"}, "maxtext_env")


def test_env_names_of_non_mappings() -> None:
    assert env_name_problems(None, "f") == []
    assert env_name_problems(["A"], "inference_env") == [
        "inference_env must be a mapping of environment variable names to values"
    ]


def test_env_names_filter_raises_a_filter_error() -> None:
    from ansible.errors import AnsibleFilterError

    assert env_names({"A": 1}, "x") == {"A": 1}
    with pytest.raises(AnsibleFilterError, match=r"inference_env: '-S x' is not an environment variable name"):
        env_names({"-S x": 1}, "inference_env")


# ----------------------------------------------------------------------------- the MaxText templates

RENDER = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Render the run directory's files
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', root ~ '/roles/maxtext/templates/' ~ item ~ '.j2') }}"
        dest: "{{ out }}/{{ item }}"
        mode: "0755"
      loop: [launch.sh, env.sh, stop.sh, config.yml]
"""


def render(tmp_path: Path, node: str, values: list[str]) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = [sys.executable, "-c", "import os, sys; print(repr(sys.argv[1:])); print(repr(os.environ['HOSTILE_0']))"]
    extravars = {
        "root": str(ROOT),
        "ansible_python_interpreter": sys.executable,
        "out": str(run_dir),
        "cvs_node": node,
        "_maxtext_tag": "maxtext-20261203T000000-abcd",
        "_maxtext_run_dir": str(run_dir),
        "_maxtext_log": str(run_dir / "training.log"),
        "_maxtext_found": {"workdir": str(workdir)},
        "_maxtext_index": 0,
        "_maxtext_nodes": 1,
        "_maxtext_cmd": quote_all(argv + values),
        "_maxtext_env_all": {f"HOSTILE_{i}": v for i, v in enumerate(values)},
        "_maxtext_config": {"run_name": "x", "note": node},
        "maxtext_stop_grace": 1,
    }
    playbook = tmp_path / "render.yml"
    playbook.write_text(RENDER)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook), "-e", json.dumps(extravars)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run_dir


@pytest.mark.parametrize(
    "node",
    [
        "gpu01$(touch${IFS}PWNED-node)",
        "gpu02`touch PWNED-node`;touch PWNED-node;'\" x",
        "gpu03\ntouch PWNED-node #",
        FQDN_253,
    ],
    ids=["dollar", "backtick-quotes", "newline", "fqdn-253"],
)
def test_maxtext_scripts_take_hostile_values_as_data(tmp_path: Path, node: str) -> None:
    node = node.replace("PWNED", str(tmp_path / "pwned"))
    # undecodable bytes cannot come in through -e JSON; the quote tests above cover them
    values = [v for v in hostile(tmp_path) if "\udcff" not in v]
    run_dir = render(tmp_path, node, values)
    for script in ("launch.sh", "env.sh", "stop.sh"):
        subprocess.run(["bash", "-n", str(run_dir / script)], check=True, capture_output=True)
    proc = subprocess.run(
        ["setsid", "--wait", "bash", str(run_dir / "launch.sh")],  # its own process group, as the role starts it
        env={"PATH": os.environ["PATH"], "CVS_MAXTEXT_RUN_DIR": str(run_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    log = (run_dir / "training.log").read_text()
    assert proc.returncode == 0, log
    assert (run_dir / "exit_code").read_text().strip() == "0"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")) == [], log
    lines = log.splitlines()
    assert repr(values) in lines, log  # every argument reached the program exactly
    assert repr(values[0]) in lines  # and the environment
    assert f"cvs.cluster.maxtext: run maxtext-20261203T000000-abcd on {node}, process 0 of 1:" in log
    # the node name is in the comments, on one line
    first = (run_dir / "launch.sh").read_text().splitlines()[1]
    assert first.startswith("# Launcher of MaxText run") and comment_text(node) in first
    # stop.sh finds nothing of a finished run to stop
    stop = subprocess.run(["bash", str(run_dir / "stop.sh"), "1"], capture_output=True, text=True, check=False)
    assert stop.returncode == 0, stop.stdout + stop.stderr


# ----------------------------------------------------------------------------- path_component (log_poll save_dir)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("node1", "node1"),
        ("node1-ctr", "node1-ctr"),
        ("gpu01$(touch${IFS}/tmp/x)", "gpu01$(touch${IFS}%2Ftmp%2Fx)"),
        ("/etc", "%2Fetc"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("a%2Fb", "a%252Fb"),
        ("a\nb", "a%0Ab"),
        (FQDN_253, FQDN_253),
    ],
)
def test_path_component_is_one_file_name(name: str, expected: str) -> None:
    assert path_component(name) == expected


def test_path_component_bounds_long_names_and_keeps_them_distinct(tmp_path: Path) -> None:
    a, b = FQDN_253 + "-ctr", FQDN_253[:-1] + "e-ctr"
    ca, cb = path_component(a), path_component(b)
    assert ca != cb
    for c in (ca, cb, path_component("ü" * 200)):
        assert len(c.encode()) <= 255 and "/" not in c
        (tmp_path / c).mkdir()  # the file system takes it
    assert ca.startswith(FQDN_253[:200])
