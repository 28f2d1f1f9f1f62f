# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-node workload container: settings normalisation and runtime arguments.

Pure logic shared by the prepare/dispose roles (through filters) and tests:
legacy CVS keys are mapped, runtime args are merged onto the CVS defaults
(lists appended, mappings merged, scalars overriding, ulimits by name) and
translated for a runtime (docker_container parameters or a podman argv).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

LIFETIMES = ("per_run", "persistent", "no_launch")
RUNTIMES = ("docker", "podman")

# What upstream CVS gives a GPU container; real clusters want all of it.
DEFAULT_RUNTIME_ARGS: dict[str, Any] = {
    "privileged": True,
    "network_mode": "host",
    "ipc_mode": "host",
    "devices": ["/dev/kfd", "/dev/dri", "/dev/infiniband"],
    "cap_add": ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"],
    "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
    "group_add": ["video"],
    "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"],
    "shm_size": "64g",
    "volumes": [],
    "env": {},
}

LIST_ARGS = ("devices", "cap_add", "cap_drop", "security_opt", "group_add", "volumes", "ulimits", "dns")
MAP_ARGS = ("env", "labels")
SCALAR_ARGS = {
    "privileged": bool,
    "network_mode": str,
    "ipc_mode": str,
    "pid_mode": str,
    "shm_size": (str, int),
    "user": str,
    "workdir": str,
    "hostname": str,
    "entrypoint": (str, list),
    "command": (str, list),
}
# docker run flag spellings users bring from CVS files
ALIASES = {
    "network": "network_mode",
    "net": "network_mode",
    "ipc": "ipc_mode",
    "pid": "pid_mode",
    "cap-add": "cap_add",
    "security-opt": "security_opt",
    "group-add": "group_add",
    "shm-size": "shm_size",
    "ulimit": "ulimits",
    "volume": "volumes",
    "device": "devices",
    "environment": "env",
}


class ContainerConfigError(ValueError):
    """A container setting that cannot be used; the message names the field."""


def normalize_container(cfg: Mapping[str, Any] | None, warn: Callable[[str], None] | None = None) -> dict:
    """Validate cvs_container and map legacy enabled/launch keys onto lifetime."""
    cfg = dict(cfg or {})
    if "lifetime" not in cfg and ("launch" in cfg or "enabled" in cfg):
        launch = cfg.get("launch", True)
        cfg["lifetime"] = "per_run" if _truthy(launch) else "no_launch"
        if warn:
            warn(
                f"cvs_container.launch/enabled are deprecated; mapped launch={launch!r} to lifetime={cfg['lifetime']!r}"
            )
    cfg.pop("launch", None)
    cfg.pop("enabled", None)
    cfg.setdefault("lifetime", "per_run")
    if cfg["lifetime"] not in LIFETIMES:
        raise ContainerConfigError(
            f"cvs_container.lifetime must be one of {', '.join(LIFETIMES)}, got {cfg['lifetime']!r}"
        )
    if not cfg.get("image"):
        raise ContainerConfigError("cvs_container.image is required for the container orchestrator")
    cfg.setdefault("name", "cvs-workload")
    try:
        cfg["ssh_port"] = int(cfg.get("ssh_port", 2224))
    except (TypeError, ValueError) as exc:
        port = cfg.get("ssh_port")
        raise ContainerConfigError(f"cvs_container.ssh_port must be a port number, got {port!r}") from exc
    if not 0 < cfg["ssh_port"] < 65536:
        raise ContainerConfigError(f"cvs_container.ssh_port out of range: {cfg['ssh_port']}")
    runtime = cfg.get("runtime") or {}
    if not isinstance(runtime, Mapping):
        raise ContainerConfigError(f"cvs_container.runtime must be a mapping, got {type(runtime).__name__}")
    runtime = dict(runtime)
    runtime.setdefault("name", "docker")
    if runtime["name"] not in RUNTIMES:
        raise ContainerConfigError(
            f"cvs_container.runtime.name must be one of {', '.join(RUNTIMES)}, got {runtime['name']!r}"
        )
    runtime["args"] = merge_runtime_args(DEFAULT_RUNTIME_ARGS, runtime.get("args"))
    cfg["runtime"] = runtime
    env = cfg.get("env") or {}
    if not isinstance(env, Mapping):
        raise ContainerConfigError(f"cvs_container.env must be a mapping, got {type(env).__name__}")
    cfg["env"] = {str(k): str(v) for k, v in env.items()}
    return cfg


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def merge_runtime_args(defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """Lists are appended (duplicates dropped), mappings merged, scalars override; ulimits merge by name."""
    merged = {
        k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in defaults.items()
    }
    if overrides is None:
        return merged
    if not isinstance(overrides, Mapping):
        raise ContainerConfigError(f"cvs_container.runtime.args must be a mapping, got {type(overrides).__name__}")
    for raw_key, value in overrides.items():
        key = ALIASES.get(raw_key, raw_key).replace("-", "_")
        field = f"cvs_container.runtime.args.{raw_key}"
        if key in LIST_ARGS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list):
                raise ContainerConfigError(f"{field} must be a list, got {type(value).__name__}")
            if key == "ulimits":
                merged[key] = _merge_ulimits(merged.get(key, []), value, field)
            else:
                merged[key] = list(dict.fromkeys([*merged.get(key, []), *(str(v) for v in value)]))
        elif key in MAP_ARGS:
            if not isinstance(value, Mapping):
                raise ContainerConfigError(f"{field} must be a mapping, got {type(value).__name__}")
            merged[key] = {**merged.get(key, {}), **{str(k): str(v) for k, v in value.items()}}
        elif key in SCALAR_ARGS:
            expected = SCALAR_ARGS[key]
            if expected is bool and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
                value = value.lower() in ("true", "yes")
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
                raise ContainerConfigError(f"{field} must be {names}, got {type(value).__name__} {value!r}")
            merged[key] = value
        else:
            raise ContainerConfigError(
                f"{field} is not a supported runtime argument (known: "
                f"{', '.join(sorted((*LIST_ARGS, *MAP_ARGS, *SCALAR_ARGS)))})"
            )
    return merged


def _merge_ulimits(base: list, extra: list, field: str) -> list:
    by_name: dict[str, str] = {}
    for item in [*base, *extra]:
        text = str(item)
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0]:
            raise ContainerConfigError(f"{field}: ulimit {text!r} is not name:soft[:hard]")
        by_name[parts[0]] = text
    return list(by_name.values())


def docker_params(
    cfg: Mapping[str, Any], present_devices: list[str] | None = None, labels: Mapping[str, str] | None = None
) -> dict:
    """Parameters for community.docker.docker_container from a normalised config."""
    args = cfg["runtime"]["args"]
    devices = args.get("devices", []) if present_devices is None else present_devices
    params: dict[str, Any] = {
        "name": cfg["name"],
        "image": cfg["image"],
        "privileged": bool(args.get("privileged")),
        "network_mode": args.get("network_mode"),
        "ipc_mode": args.get("ipc_mode"),
        "devices": [d if ":" in d else f"{d}:{d}:rwm" for d in devices],
        "capabilities": args.get("cap_add", []),
        "cap_drop": args.get("cap_drop", []),
        "security_opts": args.get("security_opt", []),
        "groups": args.get("group_add", []),
        "ulimits": args.get("ulimits", []),
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
    cfg: Mapping[str, Any], present_devices: list[str] | None = None, labels: Mapping[str, str] | None = None
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
    for value in p.get("ulimits", []):
        name, soft, *hard = str(value).split(":")
        argv += ["--ulimit", f"{name}={soft}:{hard[0] if hard else soft}"]
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
