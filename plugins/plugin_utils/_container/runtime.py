# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runtime translation of a normalised container config: community.docker parameters, a podman argv.

Part of the container model (plugins/plugin_utils/_container/model.py); controller-only pure logic.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._container.forms import by_key, parse_device


def present_device_specs(devices: list, present: Optional[list]) -> list[dict[str, str]]:
    """The configured devices that exist on the node.

    ``present`` lists host paths found on the node (a configured directory such as
    /dev/infiniband expanded into the files below it); None means all configured devices.
    """
    specs = [parse_device(d, "devices") for d in devices]
    if present is None:
        return specs
    found = [str(p) for p in present]
    out: list[dict[str, str]] = []
    for spec in specs:
        host = spec["path_on_host"]
        if host in found:
            out.append(spec)
            continue
        prefix = host.rstrip("/") + "/"
        for path in found:
            if path.startswith(prefix):
                out.append(
                    {
                        **spec,
                        "path_on_host": path,
                        "path_in_container": spec["path_in_container"].rstrip("/") + "/" + path[len(prefix) :],
                    }
                )
    return by_key(out, lambda d: d["path_on_host"])


def docker_params(
    cfg: Mapping[str, Any], present_devices: Optional[list] = None, labels: Optional[Mapping[str, str]] = None
) -> dict:
    """Parameters for community.docker.docker_container from a normalised config."""
    args = cfg["runtime"]["args"]
    devices = present_device_specs(args.get("devices", []), present_devices)
    params: dict[str, Any] = {
        "name": cfg["name"],
        "image": cfg.get("image"),
        "privileged": bool(args.get("privileged")),
        "network_mode": args.get("network_mode"),
        "ipc_mode": args.get("ipc_mode"),
        "devices": [f"{d['path_on_host']}:{d['path_in_container']}:{d['cgroup_permissions']}" for d in devices],
        "capabilities": args.get("cap_add", []),
        "cap_drop": args.get("cap_drop", []),
        "security_opts": args.get("security_opt", []),
        "groups": args.get("group_add", []),
        "ulimits": [f"{u['name']}:{u['soft']}:{u['hard']}" for u in args.get("ulimits", [])],
        "shm_size": str(args["shm_size"]) if args.get("shm_size") else None,
        "volumes": args.get("volumes", []),
        "env": {**cfg.get("env", {}), **args.get("env", {})},
        "labels": {**args.get("labels", {}), **(labels or {})},
        "command": args.get("command") or ["sleep", "infinity"],
        "pid_mode": args.get("pid_mode"),
        "user": args.get("user"),
        "working_dir": args.get("workdir"),
        "hostname": args.get("hostname"),
        "entrypoint": args.get("entrypoint"),
        "dns_servers": args.get("dns", []),
    }
    if isinstance(params["entrypoint"], str):
        params["entrypoint"] = [params["entrypoint"]]
    return {k: v for k, v in params.items() if v not in (None, [], {})} | {"privileged": params["privileged"]}


def podman_run_argv(
    cfg: Mapping[str, Any], present_devices: Optional[list] = None, labels: Optional[Mapping[str, str]] = None
) -> list[str]:
    """`podman run -d …` argv from a normalised config (podman has no Ansible module in our dependencies)."""
    p = docker_params(cfg, present_devices, labels)
    argv = ["podman", "run", "-d", "--name", p["name"]]
    if p["privileged"]:
        argv.append("--privileged")
    if p.get("ipc_mode") == "host":
        p.pop("shm_size", None)  # podman refuses --shm-size with --ipc host; docker ignores it there
    flags = (
        ("network_mode", "--network"),
        ("ipc_mode", "--ipc"),
        ("pid_mode", "--pid"),
        ("shm_size", "--shm-size"),
        ("user", "--user"),
        ("working_dir", "--workdir"),
        ("hostname", "--hostname"),
    )
    for key, flag in flags:
        if p.get(key):
            argv += [flag, str(p[key])]
    repeated = (
        ("devices", "--device"),
        ("capabilities", "--cap-add"),
        ("cap_drop", "--cap-drop"),
        ("security_opts", "--security-opt"),
        ("groups", "--group-add"),
        ("volumes", "--volume"),
        ("dns_servers", "--dns"),
    )
    for key, flag in repeated:
        for value in p.get(key, []):
            argv += [flag, str(value)]
    for limit in cfg["runtime"]["args"].get("ulimits", []):
        argv += ["--ulimit", f"{limit['name']}={limit['soft']}:{limit['hard']}"]
    for key, value in p.get("env", {}).items():
        argv += ["--env", f"{key}={value}"]
    for key, value in p.get("labels", {}).items():
        argv += ["--label", f"{key}={value}"]
    if p.get("entrypoint"):
        argv += ["--entrypoint", p["entrypoint"][0]]
    argv.append(p["image"])
    command = p["command"]
    argv += command if isinstance(command, list) else ["sh", "-c", command]
    return argv
