# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters shell_comment, env_names and env_name_problems (see the .yml docs beside this file)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.shell import (
    EnvNameError,
    comment_text,
    env_name_problems,
    valid_env_names,
)


def shell_comment(value: Any) -> str:
    return comment_text(value)


def env_names(env: Any, field: str = "environment") -> Any:
    try:
        return valid_env_names(env, field)
    except EnvNameError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _env_name_problems(env: Any, field: str = "environment") -> list:
    return env_name_problems(env, field)


class FilterModule:
    def filters(self) -> dict:
        return {"shell_comment": shell_comment, "env_names": env_names, "env_name_problems": _env_name_problems}
