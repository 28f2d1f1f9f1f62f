# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container model's value forms: errors, key checks, and the ulimit, device and volume forms.

Part of the container model (plugins/plugin_utils/_container/model.py); controller-only pure logic.
Every form Docker's CLI, the community.docker modules and CVS cluster files accept is mapped
once onto one form; anything else raises :class:`ContainerConfigError` naming the key path
and the accepted forms.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest, type_name
from ansible_collections.cvs.cluster.plugins.plugin_utils._common.shell import ENV_NAME_RE

# Resource names Docker's --ulimit accepts (go-units).
ULIMIT_NAMES = (
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
)
ULIMIT_FORMS = (
    "'name=soft[:hard]' (docker run --ulimit, CVS cluster files, e.g. memlock=-1, nofile=65535:65535), "
    "'name:soft[:hard]' (community.docker), {name, soft, hard}, or a mapping of name to a limit or "
    "{soft, hard} (compose); limits are integers, -1 = unlimited"
)
DEVICE_FORMS = (
    "'/host/path[:/container/path][:perms]' with perms made of r, w, m (docker run --device), "
    "or {path_on_host, path_in_container, cgroup_permissions}"
)
VOLUME_FORMS = (
    "'/host/path:/container/path[:options]', 'volume-name:/container/path[:options]' or "
    "'/container/path' (docker run -v), or {source, target, read_only, type: bind|volume}; options from "
    "ro, rw, z, Z, [r]shared, [r]slave, [r]private, nocopy, delegated, cached, consistent"
)
_ULIMIT_VALUE_RE = re.compile(r"^-?\d+$")
_VOLUME_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VOLUME_OPTIONS = frozenset(
    {"ro", "rw", "z", "Z", "shared", "rshared", "slave", "rslave", "private", "rprivate"}
    | {"nocopy", "delegated", "cached", "consistent"}
)
_PROPAGATION = frozenset({"shared", "rshared", "slave", "rslave", "private", "rprivate"})
_DEVICE_KEYS = ("path_on_host", "path_in_container", "cgroup_permissions")
_VOLUME_KEYS = ("source", "target", "read_only", "type")
_ULIMIT_KEYS = ("name", "soft", "hard")


class ContainerConfigError(ValueError):
    """A container setting that cannot be used; names the host (when known) and the key path."""

    def __init__(self, field: str, message: str, host: Optional[str] = None) -> None:
        self.field = field
        self.message = message
        self.host = host
        prefix = f"{host}: " if host else ""
        super().__init__(f"{prefix}{field}: {message}")


# --------------------------------------------------------------------------- helpers


def check_keys(raw: Mapping[str, Any], valid: Any, field: str) -> None:
    for key in raw:
        if key not in valid:
            raise ContainerConfigError(f"{field}.{key}", "is not a known key" + closest(key, valid))


def as_mapping(value: Any, field: str, what: str = "a mapping") -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ContainerConfigError(field, f"must be {what}, got {type_name(value)} {value!r}")
    return value


def as_text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ContainerConfigError(field, f"must be a non-empty string, got {type_name(value)} {value!r}")
    return value.strip()


def as_bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ContainerConfigError(field, f"must be true or false, got {type_name(value)} {value!r}")


def env_text(name: Any, raw: Any) -> str:
    """One environment entry as the process gets it (booleans as true/false); ValueError names the problem."""
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        raise ValueError("is not a valid environment variable name")
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (str, int, float)):
        return str(raw)
    raise ValueError(f"must be a string or number, got {type_name(raw)}")


def parse_env(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    env: dict[str, str] = {}
    for name, raw in as_mapping(value, field, "a mapping of variable names to values").items():
        try:
            env[name] = env_text(name, raw)
        except ValueError as exc:
            raise ContainerConfigError(f"{field}.{name}", str(exc)) from None
    return env


# --------------------------------------------------------------------------- ulimits


def _limit(value: Any, field: str) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, str) and _ULIMIT_VALUE_RE.match(value.strip()))
    ):
        raise ContainerConfigError(
            field, f"limit {value!r} is not an integer (-1 = unlimited); accepted: {ULIMIT_FORMS}"
        )
    number = int(value)
    if number < -1:
        raise ContainerConfigError(field, f"limit {number} is below -1 (-1 = unlimited)")
    return number


def _ulimit(name: Any, soft: Any, hard: Any, field: str) -> dict[str, Any]:
    if not isinstance(name, str) or name not in ULIMIT_NAMES:
        raise ContainerConfigError(
            field,
            f"{name!r} is not a ulimit name" + closest(name, ULIMIT_NAMES, "names") + f"; accepted: {ULIMIT_FORMS}",
        )
    soft_n = _limit(soft, field)
    hard_n = soft_n if hard is None else _limit(hard, field)
    if hard_n != -1 and (soft_n == -1 or soft_n > hard_n):
        raise ContainerConfigError(field, f"{name}: soft limit {soft_n} is above the hard limit {hard_n}")
    return {"name": name, "soft": soft_n, "hard": hard_n}


def parse_ulimit(item: Any, field: str) -> dict[str, Any]:
    """One ulimit in any accepted form -> {name, soft, hard}."""
    if isinstance(item, Mapping):
        check_keys(item, _ULIMIT_KEYS, field)
        if "name" not in item or "soft" not in item:
            raise ContainerConfigError(field, f"needs name and soft; accepted: {ULIMIT_FORMS}")
        return _ulimit(item["name"], item["soft"], item.get("hard"), field)
    if not isinstance(item, str):
        raise ContainerConfigError(field, f"{item!r} is not a ulimit; accepted: {ULIMIT_FORMS}")
    text = item.strip()
    if "=" in text:  # docker CLI / CVS: name=soft[:hard]
        name, _sep, limits = text.partition("=")
        parts = limits.split(":")
    else:  # community.docker: name:soft[:hard]
        name, *parts = text.split(":")
    if not name or len(parts) not in (1, 2) or not all(parts):
        raise ContainerConfigError(field, f"{item!r} is not a ulimit; accepted: {ULIMIT_FORMS}")
    return _ulimit(name, parts[0], parts[1] if len(parts) == 2 else None, field)


def parse_ulimits(value: Any, field: str) -> list[dict[str, Any]]:
    """A list (or one string, or a compose-style mapping) of ulimits -> [{name, soft, hard}]."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping):  # compose: {nofile: {soft, hard}, nproc: 65535}
        out = []
        for name, limit in value.items():
            where = f"{field}.{name}"
            if isinstance(limit, Mapping):
                check_keys(limit, ("soft", "hard"), where)
                if "soft" not in limit:
                    raise ContainerConfigError(where, f"needs soft; accepted: {ULIMIT_FORMS}")
                out.append(_ulimit(name, limit["soft"], limit.get("hard"), where))
            else:
                out.append(_ulimit(name, limit, None, where))
        return out
    if not isinstance(value, list):
        raise ContainerConfigError(field, f"must be a list, got {type_name(value)}; accepted: {ULIMIT_FORMS}")
    return [parse_ulimit(item, f"{field}[{index}]") for index, item in enumerate(value)]


# --------------------------------------------------------------------------- devices


def _device_mode(mode: str) -> bool:
    return bool(mode) and len(set(mode)) == len(mode) and set(mode) <= set("rwm")


def parse_device(item: Any, field: str) -> dict[str, str]:
    """One device in any accepted form -> {path_on_host, path_in_container, cgroup_permissions}."""
    if isinstance(item, Mapping):
        check_keys(item, _DEVICE_KEYS, field)
        if "path_on_host" not in item:
            raise ContainerConfigError(field, f"needs path_on_host; accepted: {DEVICE_FORMS}")
        host = as_text(item["path_on_host"], f"{field}.path_on_host")
        container = as_text(item.get("path_in_container", host), f"{field}.path_in_container")
        mode = as_text(item.get("cgroup_permissions", "rwm"), f"{field}.cgroup_permissions")
    elif isinstance(item, str) and item.strip():
        parts = item.strip().split(":")
        if len(parts) == 1:
            host, container, mode = parts[0], parts[0], "rwm"
        elif len(parts) == 2:
            host, container, mode = (
                (parts[0], parts[0], parts[1]) if _device_mode(parts[1]) else (parts[0], parts[1], "rwm")
            )
        elif len(parts) == 3:
            host, container, mode = parts
        else:
            raise ContainerConfigError(field, f"{item!r} is not a device; accepted: {DEVICE_FORMS}")
    else:
        raise ContainerConfigError(field, f"{item!r} is not a device; accepted: {DEVICE_FORMS}")
    if not host.startswith("/") or not container.startswith("/"):
        raise ContainerConfigError(field, f"{item!r}: device paths must be absolute; accepted: {DEVICE_FORMS}")
    if not _device_mode(mode):
        raise ContainerConfigError(
            field, f"{item!r}: permissions {mode!r} are not made of r, w, m; accepted: {DEVICE_FORMS}"
        )
    return {"path_on_host": host, "path_in_container": container, "cgroup_permissions": mode}


def parse_devices(value: Any, field: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ContainerConfigError(field, f"must be a list, got {type_name(value)}; accepted: {DEVICE_FORMS}")
    return [parse_device(item, f"{field}[{index}]") for index, item in enumerate(value)]


# --------------------------------------------------------------------------- volumes


def _volume_options(options: str, item: Any, field: str) -> str:
    opts = options.split(",")
    bad = [o for o in opts if o not in _VOLUME_OPTIONS]
    if bad or not opts:
        raise ContainerConfigError(
            field, f"{item!r}: unknown volume option {bad[0] if bad else ''!r}; accepted: {VOLUME_FORMS}"
        )
    if (
        ("ro" in opts and "rw" in opts)
        or len([o for o in opts if o in _PROPAGATION]) > 1
        or len(set(opts)) != len(opts)
    ):
        raise ContainerConfigError(field, f"{item!r}: conflicting volume options {options!r}")
    return options


def _volume_source(source: str, item: Any, field: str) -> str:
    if not (source.startswith("/") or _VOLUME_NAME_RE.match(source)):
        raise ContainerConfigError(
            field,
            f"{item!r}: source {source!r} is neither an absolute host path nor a volume name; accepted: {VOLUME_FORMS}",
        )
    return source


def parse_volume(item: Any, field: str) -> str:
    """One volume in any accepted form -> 'src:dst[:opts]' (or '/dst' for an anonymous volume)."""
    if isinstance(item, Mapping):
        check_keys(item, _VOLUME_KEYS, field)
        if item.get("type", "bind") not in ("bind", "volume"):
            raise ContainerConfigError(f"{field}.type", f"must be bind or volume, got {item.get('type')!r}")
        if "target" not in item:
            raise ContainerConfigError(field, f"needs target; accepted: {VOLUME_FORMS}")
        target = as_text(item["target"], f"{field}.target")
        if not target.startswith("/"):
            raise ContainerConfigError(f"{field}.target", f"{target!r} must be an absolute path in the container")
        read_only = as_bool(item.get("read_only", False), f"{field}.read_only")
        if "source" not in item:
            return target
        source = _volume_source(as_text(item["source"], f"{field}.source"), item, f"{field}.source")
        return f"{source}:{target}" + (":ro" if read_only else "")
    if not isinstance(item, str) or not item.strip():
        raise ContainerConfigError(field, f"{item!r} is not a volume; accepted: {VOLUME_FORMS}")
    text = item.strip()
    parts = text.split(":")
    if len(parts) == 1:
        source, target, options = "", parts[0], ""
    elif len(parts) == 2:
        source, target, options = parts[0], parts[1], ""
    elif len(parts) == 3:
        source, target, options = parts
    else:
        raise ContainerConfigError(field, f"{item!r} is not a volume; accepted: {VOLUME_FORMS}")
    if not target.startswith("/"):
        raise ContainerConfigError(
            field, f"{item!r}: container path {target!r} must be absolute; accepted: {VOLUME_FORMS}"
        )
    if len(parts) == 1:
        return target
    _volume_source(source, item, field)
    if options:
        _volume_options(options, item, field)
    return text


def parse_volumes(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ContainerConfigError(field, f"must be a list, got {type_name(value)}; accepted: {VOLUME_FORMS}")
    return [parse_volume(item, f"{field}[{index}]") for index, item in enumerate(value)]


def by_key(items: list, key: Callable[[Any], Any]) -> list:
    """Later items replace earlier ones with the same key, keeping the first position."""
    merged: dict[Any, Any] = {}
    for item in items:
        merged[key(item)] = item
    return list(merged.values())
