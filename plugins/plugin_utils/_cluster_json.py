# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a CVS cluster file (cluster.json) and convert it to inventory data.

Controller-only, pure logic: no Ansible imports, no I/O except what the caller
hands in. The inventory plugin ``cvs.cluster.cluster_json`` is a thin wrapper
around :func:`load_cluster_json` and :func:`convert_cluster`.

The result of :func:`convert_cluster` is a neutral structure::

    {
        "hosts": {name: {var: value}},            # file order
        "groups": {"cvs_nodes": [names...], "cvs_head": [one name]},
        "group_vars": {"cvs_nodes": {var: value}},
        "warnings": [str, ...],                    # every message for the operator
        "deprecations": [str, ...],                # the subset about deprecated input
    }

Decisions (see docs/inventory.md):

* A host is named by its ``hostname`` attribute when given, else by its
  address (the ``node_dict`` key, or ``mgmt_ip`` for list entries);
  ``ansible_host`` is always the address.
* The head node is the plugin option ``head`` if given, else
  ``head_node_dict.mgmt_ip``, else the first node. It must be one of the
  nodes (matched by name, address, ``hostname`` or ``vpc_ip``); an unknown
  head is an error, never silently added: a head that is not a listed node is
  usually a jump host, and running workloads there is wrong.
* ``{user-id}`` is replaced everywhere (keys and values) except in secrets.
* Errors name the offending field by its key path (``node_dict.10.0.0.5.bmc_ip``,
  ``node_dict[1].mgmt_ip``) and never contain a secret's value.
"""

from __future__ import annotations

import getpass
import json
import os
import re
from collections.abc import Mapping
from typing import Any, Optional

__all__ = [
    "ClusterFileError",
    "convert_cluster",
    "default_user_id",
    "load_cluster_json",
    "looks_like_cluster_file",
]

NODES_GROUP = "cvs_nodes"
HEAD_GROUP = "cvs_head"
DEFAULT_SSH_PORT = 2224
LIFETIMES = ("per_run", "persistent", "no_launch")
SUPPORTED_RUNTIMES = ("docker", "podman")

USER_ID = "{user-id}"
CHANGEME = "<changeme>"
# An unfilled template placeholder such as "{xx.xx.xx.xx|hostname-1}" or
# "{head-node-ip}"; "${VAR}" (shell syntax) is not one.
_TEMPLATE_RE = re.compile(r"(?<!\$)\{[^{}]+\}")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# CVS orchestrator spellings -> (cvs_orchestrator, implied runtime name or None)
_ORCHESTRATORS: dict[str, tuple[str, Optional[str]]] = {
    "baremetal": ("baremetal", None),
    "bare-metal": ("baremetal", None),
    "bare_metal": ("baremetal", None),
    "host": ("baremetal", None),
    "ssh": ("baremetal", None),
    "container": ("container", None),
    "docker": ("container", "docker"),
    "podman": ("container", "podman"),
    "enroot": ("container", "enroot"),
}

# runtime.args: CVS key -> cvs_container.runtime.args key
_ARG_RENAMES = {"network": "network_mode", "ipc": "ipc_mode", "ulimit": "ulimits"}
_ARG_LISTS = ("devices", "cap_add", "security_opt", "group_add", "volumes", "ulimits")
_ARG_STRINGS = ("network_mode", "ipc_mode")
_KNOWN_CONTAINER_KEYS = frozenset(
    {"lifetime", "enabled", "launch", "image", "name", "image_tar", "env", "ssh_port", "runtime", "registry", "volumes"}
)
_KNOWN_NODE_KEYS = frozenset({"mgmt_ip", "hostname", "vpc_ip", "bmc_ip", "rack_id"})
_KNOWN_TOP_KEYS = frozenset(
    {"username", "priv_key_file", "password", "head_node_dict", "node_dict", "env_vars", "orchestrator", "container"}
)
# Values that mean "not set" in CVS files ("bmc_ip": "NA").
_UNSET = ("", "na", "n/a", "none")


class ClusterFileError(ValueError):
    """A CVS cluster file is invalid; ``field`` is the key path at fault."""

    def __init__(self, field: Optional[str], message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


# --------------------------------------------------------------------------
# helpers


def _path(parent: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def _is_comment(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_")


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _UNSET)


def _type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__


def _expect(value: Any, kind: type | tuple[type, ...], field: str, what: str) -> None:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # JSON true/false are ints to Python: accept them only where a boolean is wanted.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ClusterFileError(field, f"must be {what}, got {_type_name(value)}")


def _text(value: Any, field: str) -> str:
    _expect(value, str, field, "a string")
    text = value.strip()
    if not text:
        raise ClusterFileError(field, "must not be empty")
    return text


def _no_template(value: str, field: str) -> str:
    match = _TEMPLATE_RE.search(value)
    if match:
        raise ClusterFileError(
            field,
            f"contains the template placeholder {match.group(0)!r}; replace it with a real value",
        )
    return value


def _str_list(value: Any, field: str) -> list[str]:
    _expect(value, list, field, "a list of strings")
    for index, item in enumerate(value):
        _expect(item, str, _path(field, index), "a string")
    return list(value)


def _env(value: Any, field: str) -> dict[str, str]:
    """Environment mapping: names must be valid, values become strings."""
    if value is None:
        return {}
    _expect(value, Mapping, field, "a mapping of variable names to values")
    env: dict[str, str] = {}
    for name, raw in value.items():
        if _is_comment(name):
            continue
        where = _path(field, name)
        if not _ENV_NAME_RE.match(name):
            raise ClusterFileError(where, "is not a valid environment variable name")
        if isinstance(raw, bool):
            env[name] = "true" if raw else "false"
        elif isinstance(raw, (str, int, float)):
            env[name] = str(raw)
        else:
            raise ClusterFileError(where, f"must be a string or number, got {_type_name(raw)}")
    return env


def default_user_id() -> str:
    """The user that ``{user-id}`` stands for when no ``user_id`` option is given.

    Same order as CVS: ``$USER``, ``$LOGNAME``, ``$USERNAME``; then the
    login name of the current process.
    """
    for name in ("USER", "LOGNAME", "USERNAME"):
        value = os.environ.get(name)
        if value:
            return value
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (containers)
        return "root"


# --------------------------------------------------------------------------
# loading and recognising


def _find_duplicate(obj: Any, duplicates: dict[int, str], field: str = "") -> None:
    """Raise for the first object (depth first, file order) that had a key twice."""
    if isinstance(obj, dict):
        if id(obj) in duplicates:
            what = "node" if field == "node_dict" else "key"
            raise ClusterFileError(
                _path(field, duplicates[id(obj)]), f"{what} is listed twice (JSON keeps only the last one)"
            )
        for key, value in obj.items():
            _find_duplicate(value, duplicates, _path(field, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            _find_duplicate(value, duplicates, _path(field, index))


def load_cluster_json(text: str) -> dict[str, Any]:
    """Parse cluster file text, rejecting keys given twice (plain JSON loaders keep the last)."""
    duplicates: dict[int, str] = {}  # id of a parsed object -> its first repeated key

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj and not _is_comment(key):
                duplicates.setdefault(id(obj), key)
            obj[key] = value
        return obj

    try:
        data = json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as exc:
        raise ClusterFileError(None, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ClusterFileError(None, f"a cluster file must hold a JSON object, got {_type_name(data)}")
    if duplicates:
        _find_duplicate(data, duplicates)
    return data


def looks_like_cluster_file(data: Any) -> bool:
    """True when ``data`` has the shape of a CVS cluster file.

    It must be a mapping with ``node_dict`` and at least one of ``username``,
    ``head_node_dict`` or ``priv_key_file``. Nothing is validated here.
    """
    return (
        isinstance(data, Mapping)
        and "node_dict" in data
        and any(key in data for key in ("username", "head_node_dict", "priv_key_file"))
    )


# --------------------------------------------------------------------------
# placeholders


def _find_changeme(obj: Any, field: str = "") -> None:
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if _is_comment(key):
                continue
            where = _path(field, key)
            if isinstance(key, str) and CHANGEME in key.lower():
                raise ClusterFileError(where, f"key still holds the '{CHANGEME}' placeholder; replace it")
            _find_changeme(value, where)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            _find_changeme(value, _path(field, index))
    elif isinstance(obj, str) and CHANGEME in obj.lower():
        raise ClusterFileError(field, f"still holds the '{CHANGEME}' placeholder; replace it with a real value")


def _substitute_user(obj: Any, user: str, secret: bool = False) -> Any:
    """Replace ``{user-id}`` in keys and values; secrets are left untouched."""
    if secret:
        return obj
    if isinstance(obj, Mapping):
        return {
            (key.replace(USER_ID, user) if isinstance(key, str) else key): _substitute_user(
                value, user, secret=key == "password"
            )
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [_substitute_user(item, user) for item in obj]
    if isinstance(obj, str):
        return obj.replace(USER_ID, user)
    return obj


# --------------------------------------------------------------------------
# nodes


def _node_entries(node_dict: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(key path, address, attributes) for every node, in file order."""
    entries: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(node_dict, Mapping):
        for key, attrs in node_dict.items():
            if _is_comment(key):
                continue
            where = _path("node_dict", key)
            if attrs is None:
                attrs = {}
            _expect(attrs, Mapping, where, "a mapping of node attributes (bmc_ip, vpc_ip, ...)")
            address = _no_template(_text(key, where), where)
            entries.append((where, address, dict(attrs)))
    elif isinstance(node_dict, list):
        for index, item in enumerate(node_dict):
            where = _path("node_dict", index)
            if isinstance(item, str):
                entries.append((where, _no_template(_text(item, where), where), {}))
                continue
            _expect(item, Mapping, where, "a node address or a mapping with mgmt_ip")
            key = "mgmt_ip" if "mgmt_ip" in item else "hostname"
            if key not in item:
                raise ClusterFileError(where, "needs mgmt_ip (the node's address)")
            field = _path(where, key)
            address = _no_template(_text(item[key], field), field)
            entries.append((where, address, {k: v for k, v in item.items() if k != "mgmt_ip"}))
    else:
        raise ClusterFileError(
            "node_dict", f"must be a mapping of address -> attributes or a list of nodes, got {_type_name(node_dict)}"
        )
    if not entries:
        raise ClusterFileError("node_dict", "lists no nodes")
    return entries


def _build_hosts(node_dict: Any) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]]]:
    """Host vars per inventory name, plus every spelling (lower-cased) that names each host."""
    hosts: dict[str, dict[str, Any]] = {}
    aliases: dict[str, set[str]] = {}
    seen: dict[str, str] = {}  # lower-cased name or address -> key path of first use
    for where, address, attrs in _node_entries(node_dict):
        name = address
        if "hostname" in attrs and not _unset(attrs["hostname"]):
            field = _path(where, "hostname")
            name = _no_template(_text(attrs["hostname"], field), field)
        for ident in dict.fromkeys((address.lower(), name.lower())):  # ordered: stable messages
            if ident in seen:
                raise ClusterFileError(where, f"node {ident!r} is listed twice (first at {seen[ident]})")
            seen[ident] = where
        hostvars: dict[str, Any] = {"ansible_host": address}
        vpc_ip = attrs.get("vpc_ip")
        if _unset(vpc_ip):
            hostvars["cvs_vpc_ip"] = address
        else:
            field = _path(where, "vpc_ip")
            hostvars["cvs_vpc_ip"] = _no_template(_text(vpc_ip, field), field)
        for key in ("bmc_ip", "rack_id"):
            if not _unset(attrs.get(key)):
                hostvars[f"cvs_{key}"] = _text(attrs[key], _path(where, key))
        extra = {k: v for k, v in attrs.items() if k not in _KNOWN_NODE_KEYS and not _is_comment(k)}
        if extra:
            hostvars["cvs_node_extra"] = extra
        hosts[name] = hostvars
        aliases[name] = {name.lower(), address.lower()}
    return hosts, aliases


def _pick_head(
    hosts: dict[str, dict[str, Any]], aliases: dict[str, set[str]], wanted: Optional[str], field: str
) -> str:
    if wanted is None:
        return next(iter(hosts))
    key = wanted.strip().lower()
    for name, names in aliases.items():
        if key in names:
            return name
    for name, hostvars in hosts.items():
        if hostvars["cvs_vpc_ip"].lower() == key:
            return name
    raise ClusterFileError(
        field,
        f"head node {wanted!r} is not one of the nodes in node_dict ({', '.join(hosts)}); "
        "list it in node_dict or choose a listed node",
    )


# --------------------------------------------------------------------------
# orchestrator and container


def _orchestrator(value: Any) -> tuple[str, Optional[str]]:
    if value is None:
        return "baremetal", None
    text = _text(value, "orchestrator").lower()
    if text not in _ORCHESTRATORS:
        raise ClusterFileError(
            "orchestrator", f"unknown orchestrator {value!r}; use 'baremetal' (default) or 'container'"
        )
    return _ORCHESTRATORS[text]


def _legacy_lifetime(container: Mapping[str, Any], out: dict[str, Any], notes: dict[str, list[str]]) -> None:
    """Map the removed ``enabled``/``launch`` switches onto ``lifetime``."""
    legacy = [key for key in ("enabled", "launch") if key in container]
    if not legacy:
        return
    for key in legacy:
        _expect(container[key], bool, _path("container", key), "true or false")
    if container.get("enabled") is False or container.get("launch") is False:
        mapped = "no_launch"
    else:
        mapped = "per_run"
    keys = " and ".join(f"container.{key}" for key in legacy)
    explicit = out.get("lifetime")
    if explicit is not None and explicit != mapped:
        raise ClusterFileError(
            _path("container", legacy[-1]),
            f"legacy {keys} means lifetime {mapped!r} but container.lifetime is {explicit!r}; delete the legacy key",
        )
    out["lifetime"] = mapped
    message = (
        f"{keys} {'is' if len(legacy) == 1 else 'are'} deprecated and mapped to cvs_container.lifetime "
        f"{mapped!r} ('launch: true' -> 'per_run', 'launch: false' -> 'no_launch'); "
        f'replace {"it" if len(legacy) == 1 else "them"} with "lifetime": "{mapped}"'
    )
    notes["warnings"].append(message)
    notes["deprecations"].append(message)


def _runtime_args(args: Any, field: str, out: dict[str, Any], notes: dict[str, list[str]]) -> dict[str, Any]:
    if args is None:
        return {}
    _expect(args, Mapping, field, "a mapping of runtime arguments")
    result: dict[str, Any] = {}
    for key, value in args.items():
        if _is_comment(key):
            continue
        where = _path(field, key)
        if key == "registry":
            out["registry"] = _registry(value, where)
            continue
        target = _ARG_RENAMES.get(key, key)
        if target in _ARG_LISTS:
            value = _str_list(value, where)
        elif target in _ARG_STRINGS:
            value = _text(value, where)
        elif target == "privileged":
            _expect(value, bool, where, "true or false")
        elif target == "shm_size":
            _expect(value, (str, int), where, "a size such as '64G' or a number of bytes")
        elif target == "env":
            value = _env(value, where)
        else:
            notes["warnings"].append(f"{where} is not a runtime argument cvs.cluster knows; passed through unchanged")
        if target in result and result[target] != value:
            raise ClusterFileError(where, f"conflicts with {_path(field, target)}; keep one of them")
        result[target] = value
    return result


def _registry(value: Any, field: str) -> dict[str, str]:
    _expect(value, Mapping, field, "a mapping with username, password_file and optional server")
    if "password" in value:
        raise ClusterFileError(
            _path(field, "password"),
            "inline registry passwords are not accepted; put the token in a file on each node and set password_file",
        )
    registry: dict[str, str] = {}
    for key in ("username", "password_file"):
        if key not in value:
            raise ClusterFileError(_path(field, key), "is required for a registry login")
        registry[key] = _text(value[key], _path(field, key))
    server = value.get("server")
    if not _unset(server):
        registry["server"] = _text(server, _path(field, "server"))
    return registry


def _container(
    raw: Any, orchestrator: str, implied_runtime: Optional[str], notes: dict[str, list[str]]
) -> Optional[dict[str, Any]]:
    if raw is not None:
        _expect(raw, Mapping, "container", "a mapping")
    if not raw or all(_is_comment(key) for key in raw):
        if orchestrator == "container":
            raise ClusterFileError("container", "orchestrator is 'container' but the file has no container block")
        return None
    out: dict[str, Any] = {}
    if "lifetime" in raw:
        lifetime = _text(raw["lifetime"], "container.lifetime")
        if lifetime not in LIFETIMES:
            raise ClusterFileError("container.lifetime", f"must be one of {', '.join(LIFETIMES)}, got {lifetime!r}")
        out["lifetime"] = lifetime
    _legacy_lifetime(raw, out, notes)
    out.setdefault("lifetime", "per_run")
    for key in ("image", "name", "image_tar"):
        if key in raw and not _unset(raw[key]):
            field = _path("container", key)
            out[key] = _no_template(_text(raw[key], field), field)
    if "env" in raw:
        out["env"] = _env(raw["env"], "container.env")
    port = raw.get("ssh_port", DEFAULT_SSH_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ClusterFileError("container.ssh_port", "must be a TCP port number (1-65535)")
    out["ssh_port"] = port
    if "registry" in raw:
        out["registry"] = _registry(raw["registry"], "container.registry")

    runtime_raw = raw.get("runtime") or {}
    _expect(runtime_raw, Mapping, "container.runtime", "a mapping with name and args")
    name = runtime_raw.get("name")
    name = implied_runtime if _unset(name) else _text(name, "container.runtime.name").lower()
    if implied_runtime and name != implied_runtime:
        raise ClusterFileError(
            "container.runtime.name", f"is {name!r} but orchestrator says {implied_runtime!r}; make them agree"
        )
    name = name or "docker"
    if name not in SUPPORTED_RUNTIMES:
        notes["warnings"].append(
            f"container.runtime.name {name!r} is not supported by the cvs.cluster roles "
            f"({', '.join(SUPPORTED_RUNTIMES)}); containers will not start"
        )
    args = _runtime_args(runtime_raw.get("args"), "container.runtime.args", out, notes)
    if "volumes" in raw:  # container-level volumes (older CVS files): mounted like runtime.args.volumes
        volumes = _str_list(raw["volumes"], "container.volumes")
        args["volumes"] = volumes + [v for v in args.get("volumes", []) if v not in volumes]
    for key in runtime_raw:
        if key not in ("name", "args") and not _is_comment(key):
            notes["warnings"].append(f"container.runtime.{key} is not used by cvs.cluster; ignored")
    out["runtime"] = {"name": name, "args": args}

    for key, value in raw.items():
        if key not in _KNOWN_CONTAINER_KEYS and not _is_comment(key):
            out[key] = value
            notes["warnings"].append(f"container.{key} is not a key cvs.cluster knows; passed through unchanged")

    if orchestrator == "container":
        if out["lifetime"] == "no_launch" and "name" not in out:
            raise ClusterFileError("container.name", "is required with lifetime 'no_launch' (the running container)")
        if out["lifetime"] != "no_launch" and "image" not in out:
            raise ClusterFileError("container.image", f"is required with lifetime {out['lifetime']!r}")
        if out["lifetime"] == "persistent" and "name" not in out:
            notes["warnings"].append(
                "container.name is not set with lifetime 'persistent': pin a name so later runs find the container"
            )
    else:
        notes["warnings"].append(
            "the file has a container block but orchestrator is 'baremetal': cvs_container is set but unused"
        )
    return out


# --------------------------------------------------------------------------
# entry point


def convert_cluster(
    data: Mapping[str, Any], *, user_id: Optional[str] = None, head: Optional[str] = None
) -> dict[str, Any]:
    """Validate a loaded CVS cluster file and convert it to inventory data.

    :param data: the parsed file (see :func:`load_cluster_json` for duplicate-key checks).
    :param user_id: what ``{user-id}`` stands for; default :func:`default_user_id`.
    :param head: head node (name, address, hostname or vpc_ip of a listed node);
        overrides ``head_node_dict.mgmt_ip``.
    :raises ClusterFileError: naming the field at fault.
    """
    if not isinstance(data, Mapping):
        raise ClusterFileError(None, f"a cluster file must hold a JSON object, got {_type_name(data)}")
    if "node_dict" not in data:
        raise ClusterFileError("node_dict", "is required (the cluster's nodes)")
    _find_changeme(data)
    user = default_user_id() if user_id is None else _text(user_id, "user_id")
    data = _substitute_user(data, user)
    notes: dict[str, list[str]] = {"warnings": [], "deprecations": []}

    hosts, aliases = _build_hosts(data["node_dict"])

    head_field = "head"
    if head is None:
        head_dict = data.get("head_node_dict")
        if head_dict is not None:
            _expect(head_dict, Mapping, "head_node_dict", "a mapping with mgmt_ip")
            mgmt_ip = head_dict.get("mgmt_ip")
            if not _unset(mgmt_ip):
                head_field = "head_node_dict.mgmt_ip"
                head = _no_template(_text(mgmt_ip, head_field), head_field)
    head_name = _pick_head(hosts, aliases, head, head_field)

    group_vars: dict[str, Any] = {}
    if not _unset(data.get("username")):
        group_vars["ansible_user"] = _no_template(_text(data["username"], "username"), "username")
    if not _unset(data.get("priv_key_file")):
        key_file = _no_template(_text(data["priv_key_file"], "priv_key_file"), "priv_key_file")
        group_vars["ansible_ssh_private_key_file"] = os.path.expanduser(key_file)
    password = data.get("password")
    if password is not None and password != "":
        _expect(password, str, "password", "a string")  # the message never shows the value
        group_vars["ansible_password"] = password

    orchestrator, implied_runtime = _orchestrator(data.get("orchestrator"))
    group_vars["cvs_orchestrator"] = orchestrator
    container = _container(data.get("container"), orchestrator, implied_runtime, notes)
    if container is not None:
        group_vars["cvs_container"] = container
    group_vars["cvs_env"] = _env(data.get("env_vars"), "env_vars")

    ignored = [key for key in data if key not in _KNOWN_TOP_KEYS and not _is_comment(key)]
    if ignored:
        notes["warnings"].append(f"keys not used by the inventory were ignored: {', '.join(map(str, ignored))}")

    return {
        "hosts": hosts,
        "groups": {NODES_GROUP: list(hosts), HEAD_GROUP: [head_name]},
        "group_vars": {NODES_GROUP: group_vars},
        "warnings": notes["warnings"],
        "deprecations": notes["deprecations"],
    }
