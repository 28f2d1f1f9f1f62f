"""Names from the inventory and the run id stay inside the run's roots; one machine is one node (issue 37, findings
2 and 3), on the simulated cluster.

* Finding 2: nodes named ``../../../esc/d`` and ``../../../x`` train MaxText (stand-in) and pass, and every file the
  run writes is under ``cvs_scratch_root`` on the nodes (the simulated nodes share ``/var/tmp`` with the controller,
  so the test walks it from here) and under the results directory on the controller; ``-e cvs_run_id=../x`` is
  refused by the first play, naming the variable and the value, before any node is touched.
* Finding 3: ``node1`` and ``node1-again`` at one address are refused in one run, naming both, before anything
  starts (no scratch directory, no PASS, no lease left); a machine held by another run under the name ``node1`` is
  refused to a run that calls it differently, naming the holder's name.

The simulated nodes share the host's ``/etc/machine-id`` and kernel (boot id); their host names (UTS namespaces)
tell them apart, as the lease's machine identity says (plugins/module_utils/_run_guard.py).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component

VALIDATE = "playbooks/validate.yml"
RVS = "playbooks/health_rvs.yml"
MAXTEXT = "playbooks/train_maxtext.yml"
LEASES = Path("/var/tmp/cvs/leases")  # the default lease directory, shared by the simulated nodes

MAXTEXT_VARS: dict[str, Any] = {
    "maxtext_steps": 6,
    "maxtext_poll_interval": 0.5,
    "maxtext_stall_timeout": 60,
    "maxtext_stop_grace": 5,
    "maxtext_timeout": 300,
    # a fault directory that does not exist: the stand-in trainer runs healthy
    "maxtext_env": {"CVS_STAND_IN_DIR": "/nonexistent/cvs-names"},
}


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def base(tag: str) -> Iterator[Path]:
    """A directory on the shared /var/tmp; the scratch root is three levels below it, so an escape lands inside it."""
    path = Path(f"/var/tmp/cvs-names-{tag}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def inventory(cluster: Any, hosts: dict[str, int], head: str, path: Path) -> Path:
    """The generated baremetal inventory with ``hosts`` (inventory name -> index of the simulated node)."""
    inv = yaml.safe_load(cluster.inventory("baremetal").read_text())
    groups = inv["all"]["children"]
    groups["cvs_nodes"]["hosts"] = {name: {"ansible_host": cluster.nodes[i].ip} for name, i in hosts.items()}
    groups["cvs_head"]["hosts"] = {head: None}
    path.write_text(yaml.safe_dump(inv))
    return path


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() or p.is_symlink()] if root.exists() else []


def only_run(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
    assert len(runs) == 1, f"expected one run under {results}, found {runs}"
    return runs[0]


def lease_files_of(run_id: str) -> list[str]:
    out = []
    for path in LEASES.glob("*.lease"):
        try:
            if json.loads(path.read_text()).get("run_id") == run_id:
                out.append(path.name)
        except (OSError, ValueError):
            continue
    return out


def run_when_free(
    run_playbook: Callable[..., Any], *args: Any, mine: str = "", wait: float = 900, **kwargs: Any
) -> Any:
    """``run_playbook(*args, check=False, **kwargs)``, again while a run not of this test (not ``mine``) holds a node:
    other integration tests share the simulated cluster. A results directory a refused run wrote is emptied."""
    deadline = time.monotonic() + wait
    while True:
        done = run_playbook(*args, check=False, **kwargs)
        held = "is in use by run " in done.stdout and not (mine and f"is in use by run {mine} " in done.stdout)
        if not held or time.monotonic() > deadline:
            return done
        results = Path((args[2] if len(args) > 2 else {}).get("cvs_results_dir") or "/nonexistent")
        shutil.rmtree(results, ignore_errors=True)
        time.sleep(5)


# --------------------------------------------------------------------------- finding 2


def test_names_and_run_ids_with_dot_dot_write_nothing_outside_the_runs_roots(
    run_playbook: Callable[..., Any], cluster: Any, tmp_path: Path, base: Path, tag: str
) -> None:
    root = base / "s1" / "s2" / "s3"

    # a run id that climbs out: refused by the first play, naming the variable and the value; nothing is made
    bad = f"../x-{tag}"
    results_bad = tmp_path / "results-bad-id"
    refused = run_when_free(
        run_playbook,
        RVS,
        inventory(cluster, {"node1": 0}, "node1", tmp_path / "inventory-node1.yml"),
        {"cvs_run_id": bad, "cvs_scratch_root": str(root), "cvs_results_dir": str(results_bad), "rvs_poll_interval": 1},
    )
    out = refused.stdout + refused.stderr
    (tmp_path / "output-run-id.txt").write_text(out)
    assert refused.returncode != 0, out[-4000:]
    assert f"cvs_run_id: '{bad}' cannot be used: it holds '/'" in out, out[-4000:]
    assert files_under(base) == [] and files_under(results_bad) == [], "files were made before the refusal"
    assert not (tmp_path / f"x-{tag}").exists()

    # nodes named with '..': they pass, and nothing is written outside the run's roots
    names = ["../../../esc/d", "../../../x"]
    hosts = inventory(cluster, {names[0]: 0, names[1]: 1}, names[0], tmp_path / "inventory.yml")
    results = tmp_path / "results"
    train = run_when_free(
        run_playbook, MAXTEXT, hosts, {**MAXTEXT_VARS, "cvs_scratch_root": str(root), "cvs_results_dir": str(results)}
    )
    out = train.stdout + train.stderr
    (tmp_path / "output-maxtext.txt").write_text(out)

    # the nodes (their /var/tmp is this one): nothing outside the scratch root
    outside = [str(p) for p in files_under(base) if root not in p.parents]
    assert outside == [], f"written outside cvs_scratch_root {root}: {outside}\n{out[-3000:]}"
    # the controller: nothing outside the results directory but the test's own files
    outside = [str(p) for p in files_under(tmp_path) if results not in p.parents and p.parent != tmp_path]
    assert outside == [], f"written outside the results directory {results}: {outside}\n{out[-3000:]}"
    assert train.returncode == 0, out[-6000:]
    run = only_run(results)
    for name in names:
        record = json.loads((run / "checks" / path_component(name) / "maxtext.json").read_text())
        assert record["status"] == "PASS", f"{name}: {record['reason']}"
        # the log copy is under <results>/<run id>/logs/<name as one component>/, and it is this node's log
        assert Path(record["log"]).parent == run / "logs" / path_component(name), record["log"]
        assert f"on {name}, process" in Path(record["log"]).read_text()
    scratch = [p.name for p in (root / run.name).iterdir() if p.is_dir()]
    assert sorted(scratch) == sorted(map(path_component, names)), scratch


# --------------------------------------------------------------------------- finding 3


def test_two_names_for_one_machine_are_refused_in_one_run_and_across_runs(
    run_playbook: Callable[..., Any], cluster: Any, tmp_path: Path, base: Path, tag: str
) -> None:
    scratch_root = base / "scratch"
    checks = {"cvs_validate_checks": ["preflight"], "cvs_scratch_root": str(scratch_root)}

    # one run, node1 twice: refused naming both names before anything starts on any node
    results = tmp_path / "results-one-run"
    twice = inventory(cluster, {"node1": 0, "node1-again": 0, "node2": 1}, "node1", tmp_path / "twice.yml")
    one = run_when_free(run_playbook, VALIDATE, twice, {**checks, "cvs_results_dir": str(results)})
    out = one.stdout + one.stderr
    (tmp_path / "output-one-run.txt").write_text(out)
    assert one.returncode != 0, out[-6000:]
    assert "node1, node1-again: one machine (host name node1, machine-id " in out, out[-6000:]
    assert "node2: nothing was started: the inventory names one machine twice (node1 and node1-again)" in out
    run = only_run(results)
    report = json.loads((run / "results.json").read_text())
    passed = [n for n, node in report["nodes"].items() if node.get("status") == "PASS"]
    assert passed == [], f"PASS for {passed} although no node was checked"
    assert not (scratch_root / run.name).exists(), "a scratch directory was made before the refusal"
    assert lease_files_of(run.name) == [], "the refused run left a lease"

    # across runs: node1 held by another run (a live controller elsewhere); a run naming it differently is refused
    holder = f"holder-{tag}"
    lease = {"node": "node1", "run_id": holder, "ttl": 600,
             "controller": {"user": "operator", "host": f"elsewhere-{tag}", "pid": 4242}}  # fmt: skip
    take = f"""
- hosts: node1
  gather_facts: false
  tasks:
    - cvs.cluster.run_lease: {json.dumps(lease)}
"""
    give_back = take.replace('"ttl": 600', '"state": "released"')
    single = inventory(cluster, {"node1": 0}, "node1", tmp_path / "node1.yml")
    alias = f"gpu-alias-{tag}"
    results = tmp_path / "results-across-runs"
    try:
        taken = run_when_free(run_playbook, take, single, timeout=300)
        assert taken.returncode == 0, f"could not take the lease\n{taken.stdout[-3000:]}{taken.stderr[-2000:]}"
        other = run_when_free(
            run_playbook,
            VALIDATE,
            inventory(cluster, {alias: 0}, alias, tmp_path / "alias.yml"),
            {**checks, "cvs_results_dir": str(results)},
            mine=holder,
        )
    finally:
        run_playbook(give_back, single, check=False, timeout=300)
    out = other.stdout + other.stderr
    (tmp_path / "output-across-runs.txt").write_text(out)
    assert other.returncode != 0, out[-6000:]
    assert f"{alias} is in use by run {holder} (lease until " in out, out[-6000:]
    assert ", which calls this machine node1 (host node1, machine-id " in out, out[-6000:]
    assert f"-e cvs_finish_run={holder}" in out
    assert not (scratch_root / only_run(results).name).exists()
    assert lease_files_of(holder) == [], "the holder's lease was not given back"
