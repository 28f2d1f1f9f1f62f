# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters container_config, docker_params, podman_argv, container_lifetime and container_rollback.

Documentation: the .yml files beside this file. Logic: plugins/plugin_utils/_container/model.py and
_container/lifetime.py.
"""

from __future__ import annotations

from typing import Any, Optional

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.plugin_utils._container.lifetime import (
    LifetimeError,
    decide_lifetime,
    decide_rollback,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.model import (
    ContainerConfigError,
    docker_params,
    normalize_container,
    podman_run_argv,
)

_display = Display()


def _deprecated(message: str) -> None:
    _display.deprecated(message, version="1.0.0", collection_name="cvs.cluster")


def container_config(cfg: Any, host: Optional[str] = None, registry_login: Any = None) -> dict:
    try:
        return normalize_container(cfg, warn=_deprecated, host=host, registry_login=registry_login)
    except ContainerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


def _docker_params(cfg: Any, present_devices: Optional[list] = None, labels: Optional[dict] = None) -> dict:
    try:
        return docker_params(normalize_container(cfg), present_devices, labels)
    except (ContainerConfigError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"docker_params: {exc}") from None


def podman_argv(cfg: Any, present_devices: Optional[list] = None, labels: Optional[dict] = None) -> list:
    try:
        return podman_run_argv(normalize_container(cfg), present_devices, labels)
    except (ContainerConfigError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"podman_argv: {exc}") from None


def container_lifetime(probes: Any, lifetime: str, name: str, lost: Optional[list] = None) -> dict:
    try:
        return decide_lifetime(probes, lifetime, name, lost)
    except LifetimeError as exc:
        raise AnsibleFilterError(f"container_lifetime: {exc}") from None


def container_rollback(probes: Any, lost: Optional[list] = None) -> dict:
    try:
        return decide_rollback(probes, lost)
    except LifetimeError as exc:
        raise AnsibleFilterError(f"container_rollback: {exc}") from None


class FilterModule:
    def filters(self) -> dict:
        return {
            "container_config": container_config,
            "docker_params": _docker_params,
            "podman_argv": podman_argv,
            "container_lifetime": container_lifetime,
            "container_rollback": container_rollback,
        }
