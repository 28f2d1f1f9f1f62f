# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-node workload container model: the ONLY validator and normaliser of ``cvs_container``.

Controller-only pure logic (no Ansible imports). Used by the ``container_config``,
``docker_params`` and ``podman_argv`` filters (roles prepare/dispose) and by the
``cluster_json`` inventory, which maps legacy CVS keys and then calls
:func:`normalize_container`.

* Every key at every level is checked against the model; an unknown key is an
  error naming the closest valid key.
* Runtime args are merged onto the CVS GPU defaults: lists appended (duplicates
  dropped), mappings merged, scalars override; ulimits merge by name, devices by
  host path.
* ulimits, devices and volumes are accepted in every form Docker's CLI, the
  community.docker modules and CVS cluster files use, and mapped once onto one
  form (ulimit ``{name, soft, hard}``, device ``{path_on_host, path_in_container,
  cgroup_permissions}``, volume ``src:dst[:opts]``). Anything else is refused
  naming the host, the key path and the accepted forms.
* Normalising a normalised config returns it unchanged (idempotent).

The value forms live in ``_container/forms.py``, the runtime translation in
``_container/runtime.py`` and the cross-node lifetime/rollback decisions in
``_container/lifetime.py``; this module re-exports what callers need.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest, type_name
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.forms import (
    DEVICE_FORMS,
    ULIMIT_FORMS,
    ULIMIT_NAMES,
    VOLUME_FORMS,
    ContainerConfigError,
    as_bool,
    as_mapping,
    as_text,
    by_key,
    check_keys,
    parse_device,
    parse_devices,
    parse_env,
    parse_ulimit,
    parse_ulimits,
    parse_volume,
    parse_volumes,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.runtime import (
    docker_params,
    podman_run_argv,
    present_device_specs,
)

__all__ = [
    "DEFAULT_RUNTIME_ARGS",
    "DEVICE_FORMS",
    "LIFETIMES",
    "RUNTIMES",
    "ULIMIT_FORMS",
    "ULIMIT_NAMES",
    "VOLUME_FORMS",
    "ContainerConfigError",
    "docker_params",
    "merge_runtime_args",
    "normalize_container",
    "parse_device",
    "parse_ulimit",
    "parse_ulimits",
    "parse_volume",
    "podman_run_argv",
    "present_device_specs",
    "registry_from_login",
]

LIFETIMES = ("per_run", "persistent", "no_launch")
RUNTIMES = ("docker", "podman")
DEFAULT_NAME = "cvs-workload"
DEFAULT_SSH_PORT = 2224

TOP_KEYS = (
    "lifetime",
    "image",
    "name",
    "image_tar",
    "image_tar_src",
    "env",
    "ssh_port",
    "registry",
    "runtime",
    "python",
)
LEGACY_TOP_KEYS = ("enabled", "launch")
RUNTIME_KEYS = ("name", "args")
REGISTRY_KEYS = ("server", "username", "password_file", "password_file_src")
# The deprecated role variable cvs_registry_login: its password_file was read on the controller.
REGISTRY_LOGIN_KEYS = ("registry", "username", "password_file")

# What upstream CVS gives a GPU container; real clusters want all of it.
DEFAULT_RUNTIME_ARGS: dict[str, Any] = {
    "privileged": True,
    "network_mode": "host",
    "ipc_mode": "host",
    "devices": ["/dev/kfd", "/dev/dri", "/dev/infiniband"],
    "cap_add": ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"],
    "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
    "group_add": ["video"],
    "ulimits": ["memlock=-1", "stack=67108864"],
    "shm_size": "64g",
    "volumes": [],
    "env": {},
}

LIST_ARGS = ("devices", "cap_add", "cap_drop", "security_opt", "group_add", "volumes", "ulimits", "dns")
MAP_ARGS = ("env", "labels")
SCALAR_ARGS: dict[str, Any] = {
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
# docker run flag spellings and CVS cluster-file keys
ALIASES = {
    "network": "network_mode",
    "net": "network_mode",
    "ipc": "ipc_mode",
    "pid": "pid_mode",
    "cap-add": "cap_add",
    "cap-drop": "cap_drop",
    "security-opt": "security_opt",
    "group-add": "group_add",
    "shm-size": "shm_size",
    "ulimit": "ulimits",
    "volume": "volumes",
    "device": "devices",
    "environment": "env",
    "label": "labels",
    "working_dir": "workdir",
}
ARG_KEYS = tuple(sorted({*LIST_ARGS, *MAP_ARGS, *SCALAR_ARGS, *ALIASES, "registry"}))

# --------------------------------------------------------------------------- runtime args


def merge_runtime_args(
    defaults: Mapping[str, Any], overrides: Optional[Mapping[str, Any]], field: str = "cvs_container.runtime.args"
) -> dict:
    """Lists appended (duplicates dropped), mappings merged, scalars override; ulimits by name, devices by host path."""
    if overrides is None:
        overrides = {}
    as_mapping(overrides, field)
    base = merge_args_once(defaults, "defaults")
    spelled: dict[str, tuple[str, Any]] = {}
    for raw_key, value in overrides.items():
        if raw_key == "registry":
            continue  # upstream's spelling of cvs_container.registry, handled by normalize_container
        key = ALIASES.get(raw_key, raw_key)
        where = f"{field}.{raw_key}"
        if key in spelled:
            first, first_value = spelled[key]
            if first_value != value:
                raise ContainerConfigError(where, f"is the same setting as {field}.{first}; keep one of them")
        spelled[key] = (raw_key, value)
        if key == "ulimits":
            base[key] = by_key([*base[key], *parse_ulimits(value, where)], lambda u: u["name"])
        elif key == "devices":
            base[key] = by_key([*base[key], *parse_devices(value, where)], lambda d: d["path_on_host"])
        elif key == "volumes":
            base[key] = list(dict.fromkeys([*base[key], *parse_volumes(value, where)]))
        elif key in LIST_ARGS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in value
            ):
                raise ContainerConfigError(where, f"must be a list of strings, got {type_name(value)} {value!r}")
            base[key] = list(dict.fromkeys([*base.get(key, []), *(str(v) for v in value)]))
        elif key in MAP_ARGS:
            base[key] = (
                {**base.get(key, {}), **parse_env(value, where)}
                if key == "env"
                else {
                    **base.get(key, {}),
                    **{str(k): str(v) for k, v in as_mapping(value, where).items()},
                }
            )
        elif key in SCALAR_ARGS:
            base[key] = _scalar(key, value, where)
        else:
            raise ContainerConfigError(where, "is not a supported runtime argument" + closest(raw_key, ARG_KEYS))
    return base


def _scalar(key: str, value: Any, where: str) -> Any:
    expected = SCALAR_ARGS[key]
    if expected is bool:
        return as_bool(value, where)
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if not isinstance(value, kinds) or isinstance(value, bool):
        names = " or ".join({str: "a string", int: "a number", list: "a list"}[t] for t in kinds)
        if key == "shm_size":
            names = "a size such as '64g' or a number of bytes"
        raise ContainerConfigError(where, f"must be {names}, got {type_name(value)} {value!r}")
    if isinstance(value, list):
        value = [str(v) for v in value]
    return value


def merge_args_once(defaults: Mapping[str, Any], field: str) -> dict:
    """The defaults in normalised form (ulimits/devices/volumes parsed), as a fresh copy."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if key == "ulimits":
            out[key] = parse_ulimits(value, f"{field}.{key}")
        elif key == "devices":
            out[key] = parse_devices(value, f"{field}.{key}")
        elif key == "volumes":
            out[key] = parse_volumes(value, f"{field}.{key}")
        elif isinstance(value, list):
            out[key] = list(value)
        elif isinstance(value, Mapping):
            out[key] = dict(value)
        else:
            out[key] = value
    return out


# --------------------------------------------------------------------------- registry and image


def _registry(value: Any, field: str) -> dict[str, str]:
    reg = as_mapping(value, field, "a mapping with server, username and password_file (or password_file_src)")
    if "password" in reg:
        raise ContainerConfigError(
            f"{field}.password",
            "inline registry passwords are not accepted; put the token in a file on each node (password_file) "
            "or on the controller (password_file_src)",
        )
    check_keys(reg, REGISTRY_KEYS, field)
    out = {"username": as_text(reg.get("username"), f"{field}.username")}
    sources = [k for k in ("password_file", "password_file_src") if reg.get(k) not in (None, "")]
    if len(sources) != 1:
        raise ContainerConfigError(
            field,
            "needs exactly one of password_file (a file on each node) and password_file_src (a file on the "
            f"controller), got {', '.join(sources) or 'neither'}",
        )
    out[sources[0]] = as_text(reg[sources[0]], f"{field}.{sources[0]}")
    if reg.get("server") not in (None, ""):
        out["server"] = as_text(reg["server"], f"{field}.server")
    return out


def registry_from_login(login: Any, warn: Optional[Callable[[str], None]]) -> Optional[dict[str, str]]:
    """Map the deprecated role variable cvs_registry_login onto cvs_container.registry."""
    if not login:
        return None
    login = as_mapping(login, "cvs_registry_login")
    check_keys(login, REGISTRY_LOGIN_KEYS, "cvs_registry_login")
    mapped: dict[str, Any] = {"username": login.get("username"), "password_file_src": login.get("password_file")}
    if login.get("registry") not in (None, ""):
        mapped["server"] = login["registry"]
    if warn:
        warn(
            "cvs_registry_login is deprecated: use cvs_container.registry {server, username, password_file_src} "
            "(password_file_src is read on the controller, password_file on each node)"
        )
    return _registry(mapped, "cvs_registry_login")


# --------------------------------------------------------------------------- entry point


def normalize_container(
    cfg: Optional[Mapping[str, Any]],
    warn: Optional[Callable[[str], None]] = None,
    *,
    host: Optional[str] = None,
    registry_login: Any = None,
    root: str = "cvs_container",
) -> dict:
    """Validate ``cvs_container`` and return its normalised form.

    :param warn: called with deprecation warnings (legacy ``enabled``/``launch``, ``cvs_registry_login``).
    :param host: named in every error message.
    :param registry_login: the deprecated role variable ``cvs_registry_login``.
    :param root: the key path errors start with (``container`` for a CVS cluster file).
    :raises ContainerConfigError: naming host and key path.
    """
    try:
        return _normalize(cfg, warn, registry_login, root)
    except ContainerConfigError as exc:
        if exc.host is None and host:
            raise ContainerConfigError(exc.field, exc.message, host) from None
        raise


def _rooted(field: str, root: str) -> str:
    return root + field[len("cvs_container") :] if field.startswith("cvs_container") else field


def _normalize(cfg: Any, warn: Any, registry_login: Any, root: str) -> dict:
    try:
        return _normalize_fields(cfg, warn, registry_login)
    except ContainerConfigError as exc:
        if root != "cvs_container":
            raise ContainerConfigError(_rooted(exc.field, root), exc.message, exc.host) from None
        raise


def _normalize_fields(cfg: Any, warn: Any, registry_login: Any) -> dict:
    raw = dict(as_mapping(cfg if cfg is not None else {}, "cvs_container"))
    check_keys(raw, (*TOP_KEYS, *LEGACY_TOP_KEYS), "cvs_container")
    out: dict[str, Any] = {}

    lifetime = raw.get("lifetime")
    if lifetime is not None and lifetime not in LIFETIMES:
        raise ContainerConfigError(
            "cvs_container.lifetime", f"got {lifetime!r}" + closest(lifetime, LIFETIMES, "values")
        )
    legacy = [k for k in LEGACY_TOP_KEYS if k in raw]
    if legacy:
        flags = {k: as_bool(raw[k], f"cvs_container.{k}") for k in legacy}
        mapped = "no_launch" if False in flags.values() else "per_run"
        keys = " and ".join(f"cvs_container.{k}" for k in legacy)
        if lifetime is not None and lifetime != mapped:
            raise ContainerConfigError(
                f"cvs_container.{legacy[-1]}",
                f"legacy {keys} means lifetime {mapped!r} but lifetime is {lifetime!r}; delete the legacy key",
            )
        lifetime = mapped
        if warn:
            warn(
                f"{keys} {'is' if len(legacy) == 1 else 'are'} deprecated; mapped to lifetime {mapped!r} "
                "('launch: true' -> 'per_run', 'launch: false' or 'enabled: false' -> 'no_launch')"
            )
    out["lifetime"] = lifetime or "per_run"

    for key in ("image", "name", "image_tar", "image_tar_src", "python"):
        if raw.get(key) not in (None, ""):
            out[key] = as_text(raw[key], f"cvs_container.{key}")
    if "image_tar" in out and "image_tar_src" in out:
        raise ContainerConfigError(
            "cvs_container.image_tar_src",
            "set image_tar (an archive already on each node) or image_tar_src (an archive on the controller, copied "
            "to each node), not both",
        )
    for key in ("image_tar", "python"):
        if key in out and not out[key].startswith("/"):
            raise ContainerConfigError(
                f"cvs_container.{key}", f"must be an absolute path on the node, got {out[key]!r}"
            )

    port = raw.get("ssh_port", DEFAULT_SSH_PORT)
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ContainerConfigError("cvs_container.ssh_port", f"must be a TCP port number (1-65535), got {port!r}")
    out["ssh_port"] = port
    out["env"] = parse_env(raw.get("env"), "cvs_container.env")

    runtime = dict(as_mapping(raw.get("runtime") or {}, "cvs_container.runtime", "a mapping with name and args"))
    check_keys(runtime, RUNTIME_KEYS, "cvs_container.runtime")
    name = runtime.get("name") or "docker"
    if name not in RUNTIMES:
        raise ContainerConfigError("cvs_container.runtime.name", f"got {name!r}" + closest(name, RUNTIMES, "values"))
    args_raw = runtime.get("args")
    if args_raw is not None:
        as_mapping(args_raw, "cvs_container.runtime.args")
    args = merge_runtime_args(DEFAULT_RUNTIME_ARGS, args_raw)
    out["runtime"] = {"name": name, "args": args}

    registries = []
    if raw.get("registry") not in (None, {}):
        registries.append(("cvs_container.registry", _registry(raw["registry"], "cvs_container.registry")))
    if isinstance(args_raw, Mapping) and args_raw.get("registry") not in (None, {}):
        field = "cvs_container.runtime.args.registry"
        registries.append((field, _registry(args_raw["registry"], field)))
    login = registry_from_login(registry_login, warn)
    if login:
        registries.append(("cvs_registry_login", login))
    if len(registries) > 1:
        raise ContainerConfigError(
            registries[1][0],
            f"a registry login is already given by {registries[0][0]}; keep only cvs_container.registry",
        )
    if registries:
        out["registry"] = registries[0][1]

    if out["lifetime"] == "no_launch":
        if "name" not in out:
            raise ContainerConfigError(
                "cvs_container.name", "is required with lifetime no_launch (the running container)"
            )
    elif "image" not in out:
        raise ContainerConfigError("cvs_container.image", f"is required with lifetime {out['lifetime']}")
    out.setdefault("name", DEFAULT_NAME)
    return out
