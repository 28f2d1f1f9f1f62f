"""Controller-side state of log_poll (plugin_utils/_log_poll/state.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.state import StateStore, digest, playbook_run_key


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


def _age(path: str, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def test_prune_removes_old_runs_only(tmp_path: Path) -> None:
    old = StateStore(str(tmp_path), "old-run", "task")
    current = StateStore(str(tmp_path), "current-run", "task")
    _age(os.path.join(old.path, "hosts"), 7 * 24 * 3600)
    _age(old.run_dir, 7 * 24 * 3600)
    _age(current.run_dir, 7 * 24 * 3600)  # this run: never removed, whatever its age
    assert current.prune_old_runs() == [old.run_dir]
    assert not os.path.exists(old.run_dir)
    assert os.path.exists(current.run_dir)


def test_retention_is_by_last_use_and_zero_keeps_everything(tmp_path: Path) -> None:
    """A run older than the retention whose hosts still write state (a long poll of another playbook) is kept;
    one unused for longer than the retention goes; retention 0 keeps all."""
    live = StateStore(str(tmp_path), "live-run", "task")
    idle = StateStore(str(tmp_path), "idle-run", "task")
    fresh = StateStore(str(tmp_path), "fresh-run", "task")
    me = StateStore(str(tmp_path), "me", "task")
    _age(live.run_dir, 2 * 3600)  # its hosts/ was written just now
    _age(os.path.join(idle.path, "hosts"), 2 * 3600)
    _age(idle.run_dir, 2 * 3600)
    _age(os.path.join(fresh.path, "hosts"), 600)
    _age(fresh.run_dir, 600)
    assert me.prune_old_runs(0) == []
    assert me.prune_old_runs(3600) == [idle.run_dir]
    assert all(os.path.exists(s.run_dir) for s in (live, fresh, me))


def test_long_host_names_and_keys_fit_a_file_name(tmp_path: Path) -> None:
    """A valid 253-character FQDN (and a long state_key) must not make a name over NAME_MAX (255)."""
    fqdn = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(fqdn) == 253
    store = StateStore(str(tmp_path), "run", "k" * 400)
    names = [fqdn, fqdn[:-1] + "e", "node1", "ü" * 200]
    for name in names:
        store.register(name, {"can_complete": True})
        store.mark_complete(name)
        store.save_host(name, {"who": name})
    assert set(store.members()) == set(names)
    assert store.completed() == set(names)
    assert all(store.load_host(n) == {"who": n} for n in names)
    for root, dirs, files in os.walk(tmp_path):
        assert all(len(n) <= 255 for n in dirs + files), root
