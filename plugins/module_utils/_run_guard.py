# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run ownership on a node: the run lease and the run's marked processes.

Runs on the nodes (modules ``cvs.cluster.run_lease`` and ``cvs.cluster.run_processes``).

* Every workload process a run starts carries two environment variables,
  ``CVS_RUN_ID=<run id>`` and ``CVS_NODE=<node>``; children inherit them, so a
  run's processes are found by scanning ``/proc/<pid>/environ``, whatever
  process group or session they moved to (``setsid``, ``nohup``, async).
  ``CVS_NODE`` keeps nodes that share one process table (containers seen from
  their host, the simulated cluster) apart.
* A machine is held by one run at a time through a lease file
  ``<dir>/machine-<key>.lease`` (JSON ``{run_id, node, machine, controller,
  taken, expires}``, times in epoch seconds), keyed on the machine, not on the
  inventory name (``machine_identity``): two inventory names for one machine
  find the same lease. A live lease of another run refuses (naming the name
  that run gave the machine), one of this run under another name refuses too
  (the inventory names the machine twice); an expired one is stale: its run's
  controller died (or was SIGKILLed) and the new run stops what it left behind
  before taking the node.
* A guard (``guard``, started by the action ``cvs.cluster.run_guard``) waits on
  the node for its controller: a session held open from the controller ends
  when the ansible-playbook process is gone, and the guard then cancels the
  run's Slurm job (the Slurm backend), stops the run's processes, removes its
  per_run container and gives the node back. Dispose
  disarms it first (SIGTERM); it carries ``CVS_GUARD_RUN_ID`` instead of
  ``CVS_RUN_ID`` so that it is never one of the run's processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from typing import Any, Callable, Iterator, Optional

RUN_MARK = "CVS_RUN_ID"
NODE_MARK = "CVS_NODE"
GUARD_MARK = "CVS_GUARD_RUN_ID"
DEFAULT_LEASE_DIR = "/var/tmp/cvs/leases"
# the guard's first line: it is listening (the rest of the line is its pid)
GUARD_ARMED = "cvs-guard armed"
# where a machine's identity is read (machine-id: systemd's, else D-Bus's; the boot id: the kernel's, new each boot)
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


# The arguments every run module starts from (run_lease, run_processes, run_guard).
RUN_ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "node": {"type": "str", "required": True},
    "run_id": {"type": "str", "required": True},
    "grace": {"type": "int", "default": 10},
}


def run_arguments_problem(params: dict[str, Any]) -> str:
    """Why ``node``/``run_id`` cannot name a run's processes or lease, else ''."""
    return "" if str(params["run_id"]).strip() and params["node"] else "a non-empty node and run_id are needed"


def survivors_message(node: str, run_id: str, survivors: list[dict[str, Any]]) -> str:
    listed = ", ".join(f"{p['pid']} {p['args']}" for p in survivors)
    return f"{node}: processes of run {run_id} survive SIGKILL: {listed}"


class LeaseHeld(Exception):
    """The node is held by another run whose lease has not expired."""

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.readline(200).strip()
    except OSError:
        return ""


def machine_identity(
    files: tuple[str, ...] = MACHINE_ID_FILES, boot_file: str = BOOT_ID_FILE, hostname: Optional[str] = None
) -> dict[str, str]:
    """What tells this machine from every other one: ``{machine_id, boot_id, hostname, key}``.

    ``machine_id`` (``/etc/machine-id``) tells installed machines apart, ``boot_id`` machines cloned from one image
    with the same machine-id, ``hostname`` (the UTS namespace's) nodes that share one kernel and one ``/etc``: the
    simulated cluster's network namespaces, containers. ``key`` is 32 hex digits of the SHA-256 of the three, the
    same for every inventory name that reaches this machine.
    """
    machine_id = next((line for line in map(_first_line, files) if line), "")
    identity = {
        "machine_id": machine_id,
        "boot_id": _first_line(boot_file),
        "hostname": hostname if hostname is not None else os.uname().nodename,
    }
    text = "\n".join(identity[k] for k in ("machine_id", "boot_id", "hostname"))
    return {**identity, "key": hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]}


def describe_machine(machine: Any) -> str:
    """``host node1, machine-id 3d1219c7…, boot 462858a4…`` (a prefix of each id is enough to tell them apart)."""
    if not isinstance(machine, dict):
        return "an unknown machine"
    return (
        f"host {machine.get('hostname') or '?'}, machine-id {str(machine.get('machine_id') or '?')[:12]}, "
        f"boot {str(machine.get('boot_id') or '?')[:8]}"
    )


def lease_file_name(machine: dict[str, str]) -> str:
    """The lease file of ``machine`` (its key: 32 hex digits, whatever the inventory calls the machine)."""
    return f"machine-{machine['key']}.lease"


def lease_path(directory: str, machine: Optional[dict[str, str]] = None) -> str:
    return os.path.join(directory, lease_file_name(machine or machine_identity()))


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def describe_controller(controller: Any) -> str:
    if isinstance(controller, dict) and controller.get("host"):
        return f"{controller.get('user') or '?'}@{controller['host']} pid {controller.get('pid')}"
    return str(controller or "an unknown controller")


def describe_holder(lease: dict[str, Any]) -> str:
    return (
        f"run {lease.get('run_id')} (lease until {_when(float(lease.get('expires', 0)))}, "
        f"taken by {describe_controller(lease.get('controller'))})"
    )


def decide_acquire(
    current: Optional[dict[str, Any]], run_id: str, node: str, now: float, stale_run: str = ""
) -> dict[str, Any]:
    """What taking the machine ``node`` names for ``run_id`` means, given the lease found there.

    Returns ``{held_by, stale_run, renew}``: ``held_by`` a message when another
    live run holds the machine, or this run holds it under another inventory
    name (refuse, naming that name), ``stale_run`` the id of an other run that
    is over (its lease expired, or it is ``stale_run``, a run the caller knows
    to be gone): stop its processes first; ``renew`` true when the lease is
    this run's.
    """
    if not current or not current.get("run_id"):
        return {"held_by": "", "stale_run": "", "renew": False}
    holder_node = str(current.get("node") or "")
    machine = describe_machine(current.get("machine"))
    if current["run_id"] == run_id:
        if holder_node and holder_node != node:
            return {
                "held_by": f"{node} and {holder_node} are one machine ({machine}) named twice in the inventory of run "
                f"{run_id}; give each machine one inventory name",
                "stale_run": "",
                "renew": False,
            }
        return {"held_by": "", "stale_run": "", "renew": True}
    if float(current.get("expires", 0)) > now and current["run_id"] != stale_run:
        alias = f", which calls this machine {holder_node} ({machine})" if holder_node and holder_node != node else ""
        return {
            "held_by": f"{node} is in use by {describe_holder(current)}{alias}; wait for it to end, or stop it with "
            f"-e cvs_finish_run={current['run_id']}",
            "stale_run": "",
            "renew": False,
        }
    return {"held_by": "", "stale_run": str(current["run_id"]), "renew": False}


@contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path + ".lock", "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_lease(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError:
        return {}  # a torn or foreign file: no owner
    return data if isinstance(data, dict) else {}


def _write(path: str, lease: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(lease, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def ensure_dir(directory: str) -> None:
    """Create the lease directory shared by every user that runs validations (mode 1777, like /tmp)."""
    if not os.path.isdir(directory):
        os.makedirs(directory, exist_ok=True)
        os.chmod(directory, 0o1777)  # makedirs' mode is cut by the umask


def acquire(
    directory: str,
    node: str,
    run_id: str,
    ttl: float,
    controller: Any,
    stale_run: str = "",
    now: Callable[[], float] = time.time,
    machine: Optional[dict[str, str]] = None,
) -> dict[str, Any]:
    """Take or renew the lease of the machine ``node`` names (``machine``, default this one) for ``ttl`` seconds;
    raise LeaseHeld when a live run holds it, or this run under another name.

    Returns ``{lease, previous, stale_run, renewed}``.
    """
    machine = machine or machine_identity()
    ensure_dir(directory)
    path = lease_path(directory, machine)
    with _locked(path):
        previous = read_lease(path)
        moment = now()
        decision = decide_acquire(previous, run_id, node, moment, stale_run)
        if decision["held_by"]:
            raise LeaseHeld(decision["held_by"], previous or {})
        taken = float(previous["taken"]) if decision["renew"] and previous and "taken" in previous else moment
        lease = {
            "run_id": run_id,
            "node": node,
            "machine": machine,
            "controller": controller,
            "taken": taken,
            "expires": moment + ttl,
        }
        _write(path, lease)
    return {"lease": lease, "previous": previous, "stale_run": decision["stale_run"], "renewed": decision["renew"]}


def release(directory: str, node: str, run_id: str, machine: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Remove the lease of the machine ``node`` names (``machine``, default this one) when ``run_id`` holds it, under
    whatever name. Returns ``{released, held_by}``."""
    path = lease_path(directory, machine)
    if not os.path.isdir(directory):
        return {"released": False, "held_by": ""}
    with _locked(path):
        current = read_lease(path)
        if not current:
            return {"released": False, "held_by": ""}
        if current.get("run_id") != run_id:
            return {"released": False, "held_by": str(current.get("run_id") or "")}
        os.unlink(path)
    return {"released": True, "held_by": ""}


def _environ(proc: str, pid: int) -> Optional[dict[bytes, bytes]]:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key] = value
    return out


def _args(proc: str, pid: int) -> str:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return ""
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:300]


def stat_fields(pid: int, proc: str = "/proc") -> Optional[list[bytes]]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), None when it cannot be read."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _alive(proc: str, pid: int) -> bool:
    fields = stat_fields(pid, proc)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def _ancestors(proc: str) -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        fields = stat_fields(pid, proc)
        try:
            pid = int(fields[1]) if fields else 0
        except (ValueError, IndexError):
            break
    return out


def marked_processes(run_id: str, node: str, proc: str = "/proc", mark: str = RUN_MARK) -> dict[str, Any]:
    """Live processes carrying ``<mark>=run_id`` (``CVS_RUN_ID``, or ``CVS_GUARD_RUN_ID``) and ``CVS_NODE=node``.

    Returns ``{processes: [{pid, args}], unreadable: n}`` (``unreadable``:
    processes whose environment this user may not read).
    """
    want = {
        mark.encode(): run_id.encode("utf-8", "surrogateescape"),
        NODE_MARK.encode(): node.encode("utf-8", "surrogateescape"),
    }
    skip = _ancestors(proc)
    found, unreadable = [], 0
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) in skip:
            continue
        pid = int(entry)
        try:
            env = _environ(proc, pid)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue
        if env is None or any(env.get(k) != v for k, v in want.items()) or not _alive(proc, pid):
            continue
        found.append({"pid": pid, "args": _args(proc, pid)})
    return {"processes": sorted(found, key=lambda p: p["pid"]), "unreadable": unreadable}


def stop_marked(
    run_id: str,
    node: str,
    grace: float,
    proc: str = "/proc",
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """SIGTERM every marked process of the run on ``node``, SIGKILL what is left after ``grace`` seconds.

    Returns ``{stopped: [{pid, args}], killed: [pids], survivors: [{pid, args}], unreadable}``.
    Processes that appear while stopping (a launcher's next child) are signalled too.
    """
    first = marked_processes(run_id, node, proc)
    seen: dict[int, dict[str, Any]] = {}
    killed: list[int] = []

    def signal_new(
        sig: int, again: bool = False, current: Optional[list[dict[str, Any]]] = None
    ) -> list[dict[str, Any]]:
        if current is None:
            current = marked_processes(run_id, node, proc)["processes"]
        for p in current:
            if p["pid"] in seen and not again:
                continue
            seen.setdefault(p["pid"], p)
            with suppress(ProcessLookupError):
                os.kill(p["pid"], sig)
        return current

    left: list[dict[str, Any]] = []
    if first["processes"]:
        signal_new(signal.SIGTERM, current=first["processes"])
        deadline = now() + max(grace, 0.0)
        while now() < deadline:
            sleep(0.1)
            if not signal_new(signal.SIGTERM):
                break
        left = signal_new(signal.SIGKILL, again=True)
        killed = [p["pid"] for p in left]
        end = now() + 5.0
        while left and now() < end:
            sleep(0.1)
            left = marked_processes(run_id, node, proc)["processes"]
    return {
        "stopped": sorted(seen.values(), key=lambda p: p["pid"]),
        "killed": killed,
        "survivors": left,
        "unreadable": first["unreadable"],
    }


def disarm_guards(
    run_id: str, node: str, proc: str = "/proc", sleep: Callable[[float], None] = time.sleep, wait: float = 5.0
) -> int:
    """SIGTERM the run's guard on ``node`` (it then ends without cleaning up) and wait for it; the number found."""
    guards = marked_processes(run_id, node, proc, mark=GUARD_MARK)["processes"]
    for p in guards:
        with suppress(ProcessLookupError):
            os.kill(p["pid"], signal.SIGTERM)
    waited = 0.0
    while guards and waited < wait and any(_alive(proc, p["pid"]) for p in guards):
        sleep(0.05)
        waited += 0.05
    return len(guards)


def remove_run_container(engine: str, name: str, run_id: str, run: Callable[..., Any] = subprocess.run) -> str:
    """Remove container ``name`` when cvs.cluster started it for ``run_id``; what was done, in words."""
    # the guard is a process of its own, with no AnsibleModule and so no run_command
    probe = run(  # pylint: disable=ansible-bad-function
        [engine, "container", "inspect", "--format", "{{json .Config.Labels}}", name],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"no container {name}"
    try:
        labels = json.loads(probe.stdout or "null") or {}
    except ValueError:
        labels = {}
    if labels.get("cvs.managed") != "true" or labels.get("cvs.run_id") != run_id:
        return f"container {name} is not this run's: left"
    removed = run([engine, "rm", "--force", name], capture_output=True, text=True, check=False)  # pylint: disable=ansible-bad-function
    if removed.returncode != 0:
        return f"container {name} could not be removed: {(removed.stderr or '').strip()[-300:]}"
    return f"removed container {name}"


def cancel_slurm_job(name: str, conf: Optional[str] = None, run: Callable[..., Any] = subprocess.run) -> str:
    """``scancel --name=<name>`` (the Slurm backend names the run's job ``cvs-<run id>``) with ``SLURM_CONF=conf``
    when given (the guard runs under sudo, which drops it); what was done, in words."""
    env = dict(os.environ, SLURM_CONF=conf) if conf else None
    try:
        done = run(  # pylint: disable=ansible-bad-function
            ["scancel", f"--name={name}"], capture_output=True, text=True, check=False, timeout=60, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Slurm job {name} not cancelled: {exc}"
    if done.returncode != 0:
        return f"Slurm job {name} not cancelled: {(done.stderr or done.stdout or '').strip()[-300:]}"
    return f"cancelled Slurm job {name}"


# the names Ansible's async_wrapper gives a job's result file (j<random>.<pid>) and the file it writes first
_ASYNC_JOB_FILE = re.compile(r"^j\d+\.\d+(\.tmp)?$")


def remove_async_files(directory: str) -> int:
    """Remove the result files of async jobs from ``directory`` (the run's, ``<scratch>/async``), then the directory
    when nothing else is left in it; the number of files removed. Other files are never touched."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if _ASYNC_JOB_FILE.match(name):
            with suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
                removed += 1
    with suppress(OSError):
        os.rmdir(directory)
    return removed


def guard_cleanup(
    run_id: str,
    node: str,
    lease_dir: str,
    container: Optional[dict[str, str]],
    grace: float,
    slurm_job: Optional[str] = None,
    slurm_conf: Optional[str] = None,
    async_dir: Optional[str] = None,
) -> dict[str, Any]:
    """What dispose does for a run on a node, done by the guard once the run's controller is gone."""
    outcome: dict[str, Any] = {"node": node, "run_id": run_id}
    if slurm_job:  # first: Slurm then ends the run's steps on every node
        outcome["slurm"] = cancel_slurm_job(slurm_job, slurm_conf)
    stopped = stop_marked(run_id, node, grace)
    outcome["stopped"] = [p["args"] for p in stopped["stopped"]]
    outcome["survivors"] = [p["args"] for p in stopped["survivors"]]
    if container:
        outcome["container"] = remove_run_container(container["engine"], container["name"], run_id)
    if async_dir:  # after the processes: a job's wrapper writes its result file when its module ends
        outcome["async_files"] = remove_async_files(async_dir)
    outcome["released"] = release(lease_dir, node, run_id)["released"]
    return outcome


def guard(
    run_id: str,
    node: str,
    lease_dir: str,
    container: Optional[dict[str, str]],
    grace: float,
    slurm_job: Optional[str] = None,
    slurm_conf: Optional[str] = None,
    async_dir: Optional[str] = None,
) -> None:
    """The node side of cvs.cluster.run_guard: wait for the end of stdin, then clean up the run.

    The controller's holder keeps stdin open while its ansible-playbook lives; SIGTERM (dispose) disarms.
    """
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with suppress(OSError):
        sys.stdout.write(f"{GUARD_ARMED} {os.getpid()}\n")
        sys.stdout.flush()
    with suppress(OSError):
        while os.read(0, 4096):
            pass
    # from here on a SIGTERM (dispose running after all) must not cut the cleanup short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    outcome = guard_cleanup(run_id, node, lease_dir, container, grace, slurm_job, slurm_conf, async_dir)
    with suppress(OSError):
        sys.stdout.write(json.dumps(outcome) + "\n")
        sys.stdout.flush()
