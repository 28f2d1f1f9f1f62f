# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters container_config, docker_params and podman_argv (see the .yml docs beside this file)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.module_utils._container import (
    ContainerConfigError,
    docker_params,
    normalize_container,
    podman_run_argv,
)

_display = Display()


def container_config(cfg: Any) -> dict:
    try:
        return normalize_container(cfg, warn=_display.warning)
    except ContainerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _docker_params(cfg: Any, present_devices: list | None = None, labels: dict | None = None) -> dict:
    try:
        return docker_params(normalize_container(cfg), present_devices, labels)
    except (ContainerConfigError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"docker_params: {exc}") from exc


def podman_argv(cfg: Any, present_devices: list | None = None, labels: dict | None = None) -> list:
    try:
        return podman_run_argv(normalize_container(cfg), present_devices, labels)
    except (ContainerConfigError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"podman_argv: {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"container_config": container_config, "docker_params": _docker_params, "podman_argv": podman_argv}
