"""Hostile input on the simulated cluster: shell metacharacters never run as code, anywhere.

Every value that reaches a shell on a node carries payloads that create ``/tmp/pwned-<tag>-<where>`` when a shell
evaluates them (``$(...)``, backticks, ``;``, quotes, spaces, newlines): inventory host names (alias hosts whose
``ansible_host`` is a real node address), host names from a CVS cluster file (the ``cvs.cluster.cluster_json``
inventory plugin), and role variables (MaxText environment, extra arguments, config overrides and patterns, scratch
and results paths, RVS paths and patterns, the inference example's environment). The RVS and MaxText playbooks run
on both backends; afterwards no such file may exist on the controller, on any node, or inside any workload container
(the container backend keeps its containers for the check: lifetime persistent, removed by the test).

Invalid environment variable names are refused before anything starts, with a message naming the key.
"""

from __future__ import annotations

import glob
import json
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

RVS = "playbooks/health_rvs.yml"
MAXTEXT = "playbooks/train_maxtext.yml"
VALIDATE = "playbooks/validate.yml"
INFERENCE = "examples/inference/inference.yml"
CONTAINER = "cvs-hostile-test"
CONTAINER_SSH_PORT = 2271
MAXTEXT_KILL_CONTAINER = "cvs-kill-test"
MAXTEXT_KILL_SSH_PORT = 2272


def payload(tag: str, where: str) -> str:
    """Shell code in every quoting context we know: each part creates /tmp/pwned-<tag>-<where><n> when evaluated."""
    p = f"/tmp/pwned-{tag}-{where}"
    return f"$(touch${{IFS}}{p}1)`touch {p}2`;touch {p}3;'\"' ;touch {p}4 #\ntouch {p}5\n"


def hostile_names(tag: str) -> list[str]:
    """Three host names: command substitution, backticks/semicolon/quotes/spaces, and a newline."""
    return [
        f"gpu01$(touch${{IFS}}/tmp/pwned-{tag}-host1)",
        f"gpu02`touch /tmp/pwned-{tag}-host2`;touch${{IFS}}/tmp/pwned-{tag}-host2b;'\" x",
        f"gpu03\ntouch /tmp/pwned-{tag}-host3 #",
    ]


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def scratch(tag: str) -> Iterator[Path]:
    """A directory on the shared filesystem (/var/tmp is the same on the controller and the baremetal nodes)."""
    path = Path(f"/var/tmp/cvs-hostile-{tag}")
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pwned(tag: str, cluster: Any, node_exec: Callable[..., Any], containers: tuple[str, ...] = ()) -> list[str]:
    """Every /tmp/pwned-<tag>* on the controller, on each node and inside each named container on each node."""
    found = [f"controller:{p}" for p in glob.glob(f"/tmp/pwned-{tag}*")]
    listing = f"ls -d /tmp/pwned-{tag}* 2>/dev/null; true"
    for node in cluster.names:
        found += [f"{node}:{p}" for p in node_exec(node, listing).stdout.split()]
        for ctr in containers:
            out = node_exec(node, ["sh", "-c", f"docker exec {ctr} sh -c '{listing}' 2>/dev/null; true"]).stdout
            found += [f"{node}/{ctr}:{p}" for p in out.split()]
    return found


def remove_containers(cluster: Any, node_exec: Callable[..., Any], *names: str) -> None:
    for node in cluster.names:
        for name in names:
            node_exec(node, f"docker rm -f {name} >/dev/null 2>&1 || true", check=False)


def checks(results_dir: Path, check: str) -> dict[str, dict[str, Any]]:
    """node -> check record of the newest run under results_dir (records found by walking: names may hold '/')."""
    runs = sorted(
        (p for p in results_dir.iterdir() if any((p / "checks").rglob(f"{check}.json"))),
        key=lambda p: p.stat().st_mtime,
    )
    assert runs, f"no run with {check} records under {results_dir}"
    out = {}
    for path in (runs[-1] / "checks").rglob(f"{check}.json"):
        rec = json.loads(path.read_text())
        out[rec["node"]] = rec
    return out


def hostile_inventory(cluster: Any, names: list[str]) -> dict[str, Any]:
    """The generated baremetal inventory with every node renamed (alias host, ansible_host = the node's address)."""
    inv = yaml.safe_load(cluster.inventory("baremetal").read_text())
    hosts = {name: {"ansible_host": node.ip} for name, node in zip(names, cluster.nodes)}
    inv["all"]["children"]["cvs_nodes"]["hosts"] = hosts
    inv["all"]["children"]["cvs_head"]["hosts"] = {names[0]: None}
    return inv


def role_vars(tag: str, results_dir: Path, scratch: Path) -> dict[str, Any]:
    """MaxText and RVS settings carrying payloads; the runs still pass."""
    return {
        "cvs_results_dir": str(results_dir),
        "cvs_scratch_root": str(scratch / ("scratch " + payload(tag, "scratch"))),
        "maxtext_steps": 8,
        "maxtext_poll_interval": 0.5,
        "maxtext_stall_timeout": 30,
        "maxtext_stop_grace": 5,
        "maxtext_timeout": 300,
        "maxtext_env": {
            "CVS_HOSTILE_VALUE": payload(tag, "env"),
            # a fault directory that does not exist: the stand-in trainer runs healthy
            "CVS_STAND_IN_DIR": "/nonexistent/" + payload(tag, "standin"),
            "TZ": "UTC",
        },
        "maxtext_extra_args": [
            "tokenizer_path=" + payload(tag, "arg")
        ],  # a key base.yml has: unknown keys stop the run
        "maxtext_config_overrides": {"tokenizer_path": payload(tag, "config")},
        "maxtext_error_patterns_extra": {"hostile": re.escape(payload(tag, "pattern"))},
        "maxtext_ignore_error_patterns_extra": {"hostile_ignored": re.escape(payload(tag, "ignore"))},
        "rvs_rocm_runtime_lib_path": "/opt/rocm/lib:" + payload(tag, "ldpath"),
        "rvs_fail_regex_patterns": [re.escape(payload(tag, "rvspattern"))],
        "rvs_poll_interval": 1,
    }


def assert_passed(proc: Any, results: dict[str, dict[str, Any]], names: list[str], out: str) -> None:
    assert proc.returncode == 0, out[-6000:]
    assert sorted(results) == sorted(names), f"records of {sorted(results)}\n{out[-4000:]}"
    for name, rec in results.items():
        assert rec["status"] == "PASS", f"{name!r}: {rec['reason']}"


# --------------------------------------------------------------------------- inventory names and role variables


def test_hostile_yaml_inventory_and_role_vars_run_nothing_on_baremetal(
    run_playbook: Callable[..., Any],
    cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    tag: str,
    scratch: Path,
) -> None:
    names = hostile_names(tag)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(hostile_inventory(cluster, names)))
    results_dir = tmp_path / ("results " + payload(tag, "results"))
    extravars = role_vars(tag, results_dir, scratch)
    # rvs_path: a directory whose name is a payload, linking to the real one (/var/tmp is shared with the nodes)
    rvs_dir = scratch / ("rvs " + payload(tag, "rvspath")).rstrip("\n")
    rvs_dir.parent.mkdir(parents=True, exist_ok=True)
    rvs_dir.symlink_to("/opt/rocm/bin")
    extravars["rvs_path"] = str(rvs_dir)

    rvs = run_playbook(RVS, inventory, extravars, check=False)
    rvs_out = rvs.stdout + rvs.stderr
    maxtext = run_playbook(MAXTEXT, inventory, extravars, check=False)
    maxtext_out = maxtext.stdout + maxtext.stderr
    (tmp_path / "output.txt").write_text(rvs_out + "\n=====\n" + maxtext_out)

    assert pwned(tag, cluster, node_exec) == [], "a payload ran as shell code"
    assert_passed(rvs, checks(results_dir, "rvs"), names, rvs_out)
    results = checks(results_dir, "maxtext")
    assert_passed(maxtext, results, names, maxtext_out)
    for name, rec in results.items():
        # the payloads reached the trainer as data, byte for byte
        text = Path(rec["log"]).read_text()
        assert f"run {rec['run']} on {name}, process" in text
        assert "tokenizer_path=" + payload(tag, "arg") in text


def test_hostile_cluster_file_and_role_vars_run_nothing_in_containers(
    run_playbook: Callable[..., Any],
    cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    tag: str,
    scratch: Path,
) -> None:
    names = hostile_names(tag)
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    cluster_file = {
        "username": cluster.user,
        "priv_key_file": str(cluster.key),
        "orchestrator": "container",
        "head_node_dict": {"mgmt_ip": cluster.head.ip},
        "node_dict": {node.ip: {"hostname": name} for name, node in zip(names, cluster.nodes)},
        "env_vars": {"CVS_HOSTILE_CLUSTER_ENV": payload(tag, "clusterenv")},
        "container": {
            **settings,
            "lifetime": "persistent",
            "name": CONTAINER,
            "ssh_port": CONTAINER_SSH_PORT,
            "env": {"CVS_HOSTILE_CONTAINER_ENV": payload(tag, "ctrenv")},
        },
    }
    inventory = tmp_path / "cluster.json"
    inventory.write_text(json.dumps(cluster_file, indent=2))
    results_dir = tmp_path / ("results " + payload(tag, "results"))
    extravars = role_vars(tag, results_dir, Path("/var/tmp") / f"cvs-hostile-{tag}")
    env = {"ANSIBLE_SSH_COMMON_ARGS": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"}
    remove_containers(cluster, node_exec, CONTAINER)
    try:
        rvs = run_playbook(RVS, inventory, extravars, env=env, check=False)
        rvs_out = rvs.stdout + rvs.stderr
        maxtext = run_playbook(MAXTEXT, inventory, extravars, env=env, check=False)
        maxtext_out = maxtext.stdout + maxtext.stderr
        (tmp_path / "output.txt").write_text(rvs_out + "\n=====\n" + maxtext_out)
        found = pwned(tag, cluster, node_exec, (CONTAINER,))
    finally:
        remove_containers(cluster, node_exec, CONTAINER)
    assert found == [], "a payload ran as shell code"
    assert_passed(rvs, checks(results_dir, "rvs"), names, rvs_out)
    results = checks(results_dir, "maxtext")
    assert_passed(maxtext, results, names, maxtext_out)
    for rec in results.values():
        assert rec["backend"] == "container"
        assert "tokenizer_path=" + payload(tag, "arg") in Path(rec["log"]).read_text()


# --------------------------------------------------------------------------- environment variable names


@pytest.mark.parametrize(
    "bad",
    [{"cvs_env": {"BAD;touch /tmp/pwned-TAG-name": "x"}}, {"maxtext_env": {"-S touch /tmp/pwned-TAG-name": "x"}}],
    ids=["cvs_env", "maxtext_env"],
)
def test_invalid_env_names_are_refused_naming_the_key(
    run_playbook: Callable[..., Any],
    cluster: Any,
    node_exec: Callable[..., Any],
    tmp_path: Path,
    tag: str,
    bad: dict[str, dict[str, str]],
) -> None:
    extravars = {key: {k.replace("TAG", tag): v for k, v in value.items()} for key, value in bad.items()}
    ((field, values),) = extravars.items()
    (name,) = values
    proc = run_playbook(MAXTEXT, "baremetal", {"cvs_results_dir": str(tmp_path), **extravars}, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{field}: '{name}' is not an environment variable name" in out, out[-4000:]
    assert pwned(tag, cluster, node_exec) == []
    assert not list(tmp_path.rglob("maxtext.json")), "the run started although the settings were refused"


def test_inference_env_names_and_values(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, tag: str
) -> None:
    base = {
        "inference_port": 18391,
        "inference_num_prompts": 5,
        "inference_poll_interval": 0.5,
        "inference_ready_timeout": 120,
        "inference_timeout": 300,
        "inference_stop_grace": 5,
        "inference_server_args": ["--load-seconds", "1", "--stats-seconds", "1"],
        "inference_client_args": ["--request-interval", "0.1"],
    }
    # a name that env(1) would take for an option (-S splits its argument into a command line)
    refused = run_playbook(
        INFERENCE,
        "baremetal",
        {**base, "cvs_results_dir": str(tmp_path / "refused"), "inference_env": {f"-S touch /tmp/pwned-{tag}-s": "1"}},
        check=False,
    )
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert f"inference_env: '-S touch /tmp/pwned-{tag}-s' is not an environment variable name" in out, out[-4000:]

    results_dir = tmp_path / "ok"
    proc = run_playbook(
        INFERENCE,
        "baremetal",
        {**base, "cvs_results_dir": str(results_dir), "inference_env": {"CVS_HOSTILE": payload(tag, "infenv")}},
        check=False,
    )
    out = proc.stdout + proc.stderr
    (tmp_path / "output.txt").write_text(out)
    assert pwned(tag, cluster, node_exec) == []
    records = checks(results_dir, "inference")
    assert proc.returncode == 0, out[-6000:]
    assert sorted(records) == cluster.names and all(r["status"] == "PASS" for r in records.values()), records


# --------------------------------------------------------------------------- lost evidence (issue 15 item 8)


def test_killed_container_keeps_the_lines_read_so_far(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, tag: str
) -> None:
    """docker kill of node2's workload container mid-run: node2's record keeps its log lines and says why."""
    import threading
    import time

    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    fault_dir = f"/tmp/cvs-kill-{tag}"
    extravars = {
        "cvs_results_dir": str(tmp_path),
        "cvs_validate_checks": ["maxtext"],
        "cvs_container": {**settings, "name": MAXTEXT_KILL_CONTAINER, "ssh_port": MAXTEXT_KILL_SSH_PORT},
        "maxtext_steps": 1000,
        "maxtext_poll_interval": 0.5,
        "maxtext_stall_timeout": 60,
        "maxtext_stop_grace": 5,
        "maxtext_timeout": 300,
        "maxtext_env": {"CVS_STAND_IN_DIR": fault_dir},
    }
    remove_containers(cluster, node_exec, MAXTEXT_KILL_CONTAINER)
    killed: dict[str, str] = {}
    stop = threading.Event()

    def controller_has_read_step_5() -> bool:
        # the kill must land after log_poll has read a line on the controller: on a loaded machine training
        # reaches step 5 before the first poll round, and the test would then measure nothing
        for path in tmp_path.glob("*/watch/*/*/node2*/maxtext.log"):
            if "completed step: 5," in path.read_text(errors="replace"):
                return True
        return False

    def killer() -> None:
        while not stop.is_set():
            if controller_has_read_step_5():
                node_exec("node2", ["docker", "kill", MAXTEXT_KILL_CONTAINER])
                killed["at"] = node_exec("node2", ["date", "-u", "+%T"]).stdout.strip()
                return
            # about 0.05 s a step in the stand-in and 1000 steps: the kill lands while training goes on
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        proc = run_playbook(VALIDATE, "container", extravars, check=False)
    finally:
        stop.set()
        thread.join(timeout=60)
        remove_containers(cluster, node_exec, MAXTEXT_KILL_CONTAINER)
    out = proc.stdout + proc.stderr
    (tmp_path.parent / f"{tmp_path.name}-output.txt").write_text(out)
    assert killed, f"node2's container was never killed (training never reached step 5)\n{out[-4000:]}"
    assert proc.returncode != 0, out[-4000:]

    records = checks(tmp_path, "maxtext")
    rec = records["node2"]
    assert rec["status"] != "PASS", rec
    assert rec["failed_node"] == "node2", rec
    assert re.search(r"node2.*connection failed", rec["reason"], re.S), rec["reason"]
    assert f"workload container {MAXTEXT_KILL_CONTAINER} on node2: exited" in rec["reason"], rec["reason"]
    assert rec["log"] and Path(rec["log"]).is_file(), rec
    kept = Path(rec["log"]).read_text()
    assert "completed step: 5," in kept, kept[-2000:]
    assert rec["lines"] and all(line in kept for line in rec["lines"]), rec["lines"]
    for node in ("node1", "node3"):
        assert records[node]["status"] != "PASS", records[node]

    run_dir = next(p for p in tmp_path.iterdir() if (p / "results.json").is_file())
    report = json.loads((run_dir / "results.json").read_text())
    assert report["summary"]["status"] != "PASS", report["summary"]
    node2 = report["nodes"]["node2"]["checks"]["maxtext"]
    assert node2["status"] != "PASS" and node2["lines"], node2
