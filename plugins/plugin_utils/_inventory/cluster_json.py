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
  ``head_node_dict.mgmt_ip``, else the first node, matched by name, address,
  ``hostname`` or ``vpc_ip`` of a node. A ``head_node_dict.mgmt_ip`` that is
  not a listed node is a jump host (upstream's generator writes it so): every
  node is reached through it (an ssh ``ProxyCommand`` with the file's user and
  key, in a ControlPath of its own), ``cvs_jump_host`` names it, and the first
  node is the head; no workload runs on it. The option ``head`` must name a listed node.
* ``{user-id}`` is replaced everywhere (keys and values) except in secrets.
* Errors name the offending field by its key path (``node_dict.10.0.0.5.bmc_ip``,
  ``node_dict[1].mgmt_ip``) and never contain a secret's value.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest, type_name
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.forms import env_text
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.model import (
    ContainerConfigError,
    normalize_container,
)

__all__ = [
    "ClusterFileError",
    "convert_cluster",
    "default_user_id",
    "jump_control_path",
    "load_cluster_json",
    "looks_like_cluster_file",
    "proxy_command_args",
]

NODES_GROUP = "cvs_nodes"
HEAD_GROUP = "cvs_head"

USER_ID = "{user-id}"
# a jump host: a DNS name or an IPv4/IPv6 address (with an optional %zone), nothing a shell would read
_HOST_NAME = re.compile(r"[A-Za-z0-9._:%\[\]-]+")
CHANGEME = "<changeme>"
# An unfilled template placeholder such as "{xx.xx.xx.xx|hostname-1}" or
# "{head-node-ip}"; "${VAR}" (shell syntax) is not one.
_TEMPLATE_RE = re.compile(r"(?<!\$)\{[^{}]+\}")

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

_KNOWN_NODE_KEYS = frozenset({"mgmt_ip", "hostname", "vpc_ip", "bmc_ip", "rack_id"})
_KNOWN_TOP_KEYS = frozenset(
    {"username", "priv_key_file", "password", "head_node_dict", "node_dict", "env_vars", "orchestrator", "container"}
)
# Keys of upstream CVS cluster files that this inventory does not use, and why (a warning names them); any other
# top-level key is refused naming the closest valid one.
_UPSTREAM_UNUSED_TOP_KEYS = {
    "racks": "rack switch trays serve upstream's 'cvs exec' on switches; nothing here logs in to switches",
    "rack_groups": "the older spelling of racks (rack switch trays for upstream's 'cvs exec')",
}
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


def _expect(value: Any, kind: type | tuple[type, ...], field: str, what: str) -> None:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # JSON true/false are ints to Python: accept them only where a boolean is wanted.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ClusterFileError(field, f"must be {what}, got {type_name(value)}")


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
        try:
            env[name] = env_text(name, raw)
        except ValueError as exc:
            raise ClusterFileError(_path(field, name), str(exc)) from None
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
        raise ClusterFileError(None, f"a cluster file must hold a JSON object, got {type_name(data)}")
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
            "node_dict", f"must be a mapping of address -> attributes or a list of nodes, got {type_name(node_dict)}"
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
    """The head's host name; '' when ``wanted`` (from ``head_node_dict.mgmt_ip``) is not a node: a jump host."""
    if wanted is None:
        return next(iter(hosts))
    key = wanted.strip().lower()
    for name, names in aliases.items():
        if key in names:
            return name
    for name, hostvars in hosts.items():
        if hostvars["cvs_vpc_ip"].lower() == key:
            return name
    if field == "head_node_dict.mgmt_ip":
        return ""
    raise ClusterFileError(
        field,
        f"head node {wanted!r} is not one of the nodes in node_dict ({', '.join(hosts)}); "
        "list it in node_dict or choose a listed node",
    )


def proxy_command_args(jump: str, user: Optional[str], key_file: Optional[str], jump_ssh_args: str = "") -> str:
    """``ansible_ssh_common_args`` that reach a node through ``jump`` (ssh -W), every value quoted.

    ssh expands ``%`` tokens in a ProxyCommand before its shell runs it, so ``%`` in a value is doubled.
    """
    if not _HOST_NAME.fullmatch(jump) or jump.startswith("-"):
        raise ClusterFileError("head_node_dict.mgmt_ip", f"{jump!r} is not a host address or name")
    argv = ["ssh", "-o", "BatchMode=yes", *shlex.split(jump_ssh_args)]
    if key_file:
        argv += ["-i", key_file]
    if user:
        argv += ["-l", user]
    words = [shlex.quote(a.replace("%", "%%")) for a in argv] + [
        "-W",
        "%h:%p",
        "--",
        shlex.quote(jump.replace("%", "%%")),
    ]
    return "-o " + shlex.quote("ProxyCommand=" + " ".join(words))


def jump_control_path(jump: str) -> str:
    """``ansible_control_path`` for nodes reached through ``jump``.

    Ansible's own ControlPath hashes only host, port and user, so a ControlMaster opened to the same address
    without the jump host (or through another one) would be reused and the ProxyCommand bypassed; ssh's ``%C``
    keeps host, port and user apart, the prefix keeps each route apart.
    """
    route = hashlib.sha1(jump.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"%(directory)s/j{route}-%%C"


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


def _strip_comments(obj: Any) -> Any:
    """The value without comment keys (``_``-prefixed) at any depth."""
    if isinstance(obj, Mapping):
        return {key: _strip_comments(value) for key, value in obj.items() if not _is_comment(key)}
    if isinstance(obj, list):
        return [_strip_comments(item) for item in obj]
    return obj


def _container(
    raw: Any, orchestrator: str, implied_runtime: Optional[str], notes: dict[str, list[str]]
) -> Optional[dict[str, Any]]:
    """Map the file's container block onto cvs_container; the container model validates and normalises it.

    Only cluster-file matters are handled here: comments, template placeholders, the runtime implied by
    ``orchestrator``, and container-level ``volumes`` (older CVS files). Everything else, legacy
    ``enabled``/``launch`` included, is the model's (plugins/plugin_utils/_container/model.py).
    """
    if raw is not None:
        _expect(raw, Mapping, "container", "a mapping")
    container = _strip_comments(raw or {})
    if not container:
        if orchestrator == "container":
            raise ClusterFileError("container", "orchestrator is 'container' but the file has no container block")
        return None
    for key in ("image", "name", "image_tar"):
        if isinstance(container.get(key), str):
            _no_template(container[key], _path("container", key))
    runtime = container.get("runtime")
    if runtime is None:
        runtime = container["runtime"] = {}
    _expect(runtime, Mapping, "container.runtime", "a mapping with name and args")
    name = runtime.get("name")
    if _unset(name):
        runtime.pop("name", None)
        if implied_runtime:
            runtime["name"] = implied_runtime
    else:
        name = runtime["name"] = _text(name, "container.runtime.name").lower()
        if implied_runtime and name != implied_runtime:
            raise ClusterFileError(
                "container.runtime.name", f"is {name!r} but orchestrator says {implied_runtime!r}; make them agree"
            )
    if "volumes" in container:  # container-level volumes (older CVS files): mounted like runtime.args.volumes
        volumes = _str_list(container.pop("volumes"), "container.volumes")
        args = runtime.get("args")
        if args is None:
            args = runtime["args"] = {}
        _expect(args, Mapping, "container.runtime.args", "a mapping of runtime arguments")
        key = "volume" if "volume" in args else "volumes"
        given = args.get(key) or []
        _expect(given, list, _path("container.runtime.args", key), "a list")
        args[key] = volumes + [v for v in given if v not in volumes]
    # CVS files write "server": "" for Docker Hub; the model wants the key left out
    for holder in (container, runtime.get("args")):
        registry = holder.get("registry") if isinstance(holder, Mapping) else None
        if isinstance(registry, Mapping) and "server" in registry and _unset(registry["server"]):
            holder["registry"] = {k: v for k, v in registry.items() if k != "server"}

    warnings: list[str] = []
    try:
        normalized = normalize_container(container, warn=warnings.append, root="container")
    except ContainerConfigError as exc:
        raise ClusterFileError(exc.field, exc.message) from None
    notes["warnings"].extend(warnings)
    notes["deprecations"].extend(warnings)
    if orchestrator != "container":
        notes["warnings"].append(
            "the file has a container block but orchestrator is 'baremetal': cvs_container is set but unused"
        )
    elif normalized["lifetime"] == "persistent" and "name" not in container:
        notes["warnings"].append(
            "container.name is not set with lifetime 'persistent': pin a name so later runs find the container"
        )
    return normalized


# --------------------------------------------------------------------------
# entry point


def convert_cluster(
    data: Mapping[str, Any], *, user_id: Optional[str] = None, head: Optional[str] = None, jump_ssh_args: str = ""
) -> dict[str, Any]:
    """Validate a loaded CVS cluster file and convert it to inventory data.

    :param data: the parsed file (see :func:`load_cluster_json` for duplicate-key checks).
    :param user_id: what ``{user-id}`` stands for; default :func:`default_user_id`.
    :param head: head node (name, address, hostname or vpc_ip of a listed node);
        overrides ``head_node_dict.mgmt_ip``.
    :param jump_ssh_args: ssh options for the hop to a jump-host head (see :func:`proxy_command_args`).
    :raises ClusterFileError: naming the field at fault.
    """
    if not isinstance(data, Mapping):
        raise ClusterFileError(None, f"a cluster file must hold a JSON object, got {type_name(data)}")
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
    jump = head if not head_name else None
    head_name = head_name or next(iter(hosts))

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

    if jump:
        group_vars["cvs_jump_host"] = jump
        group_vars["ansible_ssh_common_args"] = proxy_command_args(
            jump, group_vars.get("ansible_user"), group_vars.get("ansible_ssh_private_key_file"), jump_ssh_args
        )
        group_vars["ansible_control_path"] = jump_control_path(jump)

    orchestrator, implied_runtime = _orchestrator(data.get("orchestrator"))
    group_vars["cvs_orchestrator"] = orchestrator
    container = _container(data.get("container"), orchestrator, implied_runtime, notes)
    if container is not None:
        group_vars["cvs_container"] = container
    group_vars["cvs_env"] = _env(data.get("env_vars"), "env_vars")

    for key in data:
        if key in _KNOWN_TOP_KEYS or _is_comment(key):
            continue
        if key in _UPSTREAM_UNUSED_TOP_KEYS:
            notes["warnings"].append(f"{key}: ignored ({_UPSTREAM_UNUSED_TOP_KEYS[key]})")
            continue
        raise ClusterFileError(
            str(key),
            "is not a key of a CVS cluster file"
            + closest(key, sorted(_KNOWN_TOP_KEYS | set(_UPSTREAM_UNUSED_TOP_KEYS))),
        )

    return {
        "hosts": hosts,
        "groups": {NODES_GROUP: list(hosts), HEAD_GROUP: [head_name]},
        "group_vars": {NODES_GROUP: group_vars},
        "warnings": notes["warnings"],
        "deprecations": notes["deprecations"],
    }
