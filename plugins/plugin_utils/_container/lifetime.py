# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cross-node container decisions of cvs.cluster.prepare: lifetime check and rollback.

Pure functions over per-node probe records, exposed as the filters
``container_lifetime`` and ``container_rollback``. A probe record is
``{host, state, error, started}``: ``state`` is ``absent``, ``running`` or
``stopped`` (what the node's engine reported), ``error`` a non-empty message
when the node could not be inspected or prepared, ``started`` true when this
run created or started the node's container. ``lost`` names hosts that left
the play (unreachable or failed earlier).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

LIFETIMES = ("per_run", "persistent", "no_launch")
STATES = ("absent", "running", "stopped")


class LifetimeError(ValueError):
    """The inputs of a decision are malformed (a bug in the caller, not a cluster state)."""


def _records(probes: Iterable[Mapping[str, Any]], need_state: bool = True) -> list[dict[str, Any]]:
    out = []
    for index, probe in enumerate(probes or []):
        if not isinstance(probe, Mapping) or not probe.get("host"):
            raise LifetimeError(f"probe {index} must be a mapping with host, got {probe!r}")
        error = str(probe.get("error") or "")
        state = probe.get("state")
        if need_state and not error and state not in STATES:
            raise LifetimeError(f"{probe['host']}: state must be one of {', '.join(STATES)}, got {state!r}")
        out.append({"host": str(probe["host"]), "state": state, "error": error, "started": bool(probe.get("started"))})
    return out


def _flag(value: Any) -> bool:
    """A fact that may come back as a bool or as its text (``True``, ``false``)."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "yes", "1")


def probe_records(host_facts: Iterable[Mapping[str, Any]], hosts: Iterable[str]) -> list[dict[str, Any]]:
    """One probe record per host from the facts prepare keeps on each node.

    ``host_facts`` are the nodes' variables in the order of ``hosts``: ``_cvs_state`` (what the engine reported,
    unset when the node could not be inspected), ``_cvs_prepare_error`` (why the node failed, empty when it did not)
    and ``_cvs_started`` (this run created or started the node's container).
    """
    records = []
    for host, facts in zip(hosts, host_facts):
        facts = facts if isinstance(facts, Mapping) else {}
        records.append(
            {
                "host": str(host),
                "state": facts.get("_cvs_state") or "",
                "error": str(facts.get("_cvs_prepare_error") or ""),
                "started": _flag(facts.get("_cvs_started", False)),
            }
        )
    return records


def decide_lifetime(
    probes: Iterable[Mapping[str, Any]], lifetime: str, name: str, lost: Optional[Iterable[str]] = None
) -> dict[str, Any]:
    """What prepare does on each node for ``lifetime``, given what the engines reported.

    Returns ``{ok, message, launch, attach}``: ``ok`` false means nothing may be
    launched anywhere and ``message`` says why (naming every node at fault);
    ``launch`` lists the hosts where the container must be created or started,
    ``attach`` the hosts whose running container is used as it is.

    * Any node that could not be inspected, or left the play: refuse.
    * ``per_run``: a container of that name on any node (running or stopped) is refused.
    * ``persistent``: running everywhere = attach; running nowhere = launch everywhere
      (a stopped one is started); running on some only = refused (mixed state).
    * ``no_launch``: must be running on every node; never launches.
    """
    if lifetime not in LIFETIMES:
        raise LifetimeError(f"lifetime must be one of {', '.join(LIFETIMES)}, got {lifetime!r}")
    nodes = _records(probes)
    lost = [str(h) for h in (lost or [])]
    refused = {"ok": False, "launch": [], "attach": []}
    errors = [n for n in nodes if n["error"]]
    if errors or lost:
        parts = [f"{n['host']}: {n['error']}" for n in errors] + [
            f"{h}: unreachable or failed earlier in the play" for h in lost
        ]
        return {**refused, "message": "cvs.cluster.prepare failed before launching anything on " + "; ".join(parts)}
    running = [n["host"] for n in nodes if n["state"] == "running"]
    present = [n["host"] for n in nodes if n["state"] != "absent"]
    not_running = [n["host"] for n in nodes if n["state"] != "running"]
    if lifetime == "per_run" and present:
        return {
            **refused,
            "message": f"lifetime per_run needs a fresh container, but container {name!r} already exists on "
            f"{', '.join(present)}; remove it (cvs.cluster.dispose) or use lifetime persistent",
        }
    if lifetime == "persistent" and running and not_running:
        return {
            **refused,
            "message": f"lifetime persistent found container {name!r} running on {', '.join(running)} but not on "
            f"{', '.join(not_running)}; refusing a mixed state (dispose it everywhere or start it everywhere)",
        }
    if lifetime == "no_launch" and not_running:
        return {
            **refused,
            "message": f"lifetime no_launch needs container {name!r} running on every node; it is not running on "
            f"{', '.join(not_running)}",
        }
    return {"ok": True, "message": "", "launch": not_running, "attach": running}


def decide_rollback(probes: Iterable[Mapping[str, Any]], lost: Optional[Iterable[str]] = None) -> dict[str, Any]:
    """After launching: which nodes failed, and which containers this run must remove again.

    Returns ``{ok, failed, remove, message}``. When any node failed (an error or
    left the play), ``remove`` lists every host where this run started the
    container (containers that existed before are never touched); else nothing
    is removed.
    """
    nodes = _records(probes, need_state=False)
    lost = [str(h) for h in (lost or []) if str(h) not in {n["host"] for n in nodes}]
    failed = [n["host"] for n in nodes if n["error"]] + lost
    if not failed:
        return {"ok": True, "failed": [], "remove": [], "message": ""}
    reasons = {n["host"]: n["error"] for n in nodes if n["error"]}
    detail = "; ".join(f"{h}: {reasons.get(h) or 'unreachable'}" for h in failed)
    return {
        "ok": False,
        "failed": failed,
        "remove": [n["host"] for n in nodes if n["started"]],
        "message": f"cvs.cluster.prepare failed on {', '.join(failed)}: {detail}. "
        "Containers started by this run on other nodes were removed.",
    }
