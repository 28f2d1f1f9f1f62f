"""Controller-side state of log_poll (plugin_utils/_log_poll_state.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll_state import StateStore, digest, playbook_run_key


def test_digest_is_stable_and_distinguishes_items() -> None:
    assert digest("uuid", "a") == digest("uuid", "a")
    assert digest("uuid", "a") != digest("uuid", "b")
    assert digest("uuid", None) != digest("other", None)


def test_run_key_names_the_parent_process() -> None:
    assert playbook_run_key().startswith(f"{os.getppid()}-")


def test_decision_is_written_once(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), "run", "task")
    assert store.decision() is None
    first = store.decide({"state": "failed", "host": "n2", "reason": "boom"})
    second = store.decide({"state": "complete", "host": "n1", "reason": "done"})
    assert first == second == {"state": "failed", "host": "n2", "reason": "boom"}
    assert not [n for n in os.listdir(store.gen_path) if n.startswith(".tmp-")]


def test_any_host_name_round_trips(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), "run", "task")
    names = ["node1", "10.77.0.2", "fe80::1", "a/b", "a_b", ".hidden", "ünï"]
    for name in names:
        store.register(name, {"host": name, "can_complete": True})
        store.mark_complete(name)
        store.save_host(name, {"who": name})
    assert set(store.members()) == set(names)
    assert store.completed() == set(names)
    assert all(store.load_host(n) == {"who": n} for n in names)


def test_generations_do_not_share_group_state(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), "run", "task")
    store.register("n1", {"can_complete": True}, now=100.0)
    store.register("n2", {"can_complete": True}, now=105.0)
    store.mark_complete("n1")
    store.decide({"state": "complete", "host": "n1", "reason": "done"})
    assert store.first_joined() == 100.0
    store.set_generation(2)
    assert store.decision() is None
    assert store.completed() == set() and store.members() == {}
    assert store.first_joined() is None
    store.set_generation(1)
    assert store.decision()["state"] == "complete"


def test_tasks_and_runs_are_separate(tmp_path: Path) -> None:
    a = StateStore(str(tmp_path), "run1", "task-a")
    b = StateStore(str(tmp_path), "run1", "task-b")
    c = StateStore(str(tmp_path), "run2", "task-a")
    a.decide({"state": "failed", "host": "n1", "reason": "x"})
    assert b.decision() is None and c.decision() is None


def test_prune_removes_old_runs_only(tmp_path: Path) -> None:
    old = StateStore(str(tmp_path), "old-run", "task")
    current = StateStore(str(tmp_path), "current-run", "task")
    week_ago = time.time() - 7 * 24 * 3600
    os.utime(old.run_dir, (week_ago, week_ago))
    current.prune_old_runs()
    assert not os.path.exists(old.run_dir)
    assert os.path.exists(current.run_dir)
