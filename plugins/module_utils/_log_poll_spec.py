# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument spec of cvs.cluster.log_poll, shared by the action plugin and the module's documentation stub.

Pure data (no imports beyond typing) so both the controller and ansible-test's
validate-modules read the same options as DOCUMENTATION describes.
"""

from __future__ import annotations

from typing import Any

ARGUMENT_SPEC: dict[str, Any] = {
    "logs": {"type": "raw", "default": []},
    "error_patterns": {"type": "raw", "default": {}},
    "ignore_error_patterns": {"type": "raw", "default": {}},
    "complete": {
        "type": "dict",
        "default": {},
        "options": {
            "pattern": {"type": "str"},
            "policy": {"type": "str", "default": "all", "choices": ["all", "any", "first", "node0", "last"]},
            "hosts": {"type": "list", "elements": "str"},
            "exit_code_file": {"type": "str"},
            "http": {
                "type": "dict",
                "options": {
                    "url": {"type": "str", "required": True},
                    "status": {"type": "int", "default": 200},
                    "timeout": {"type": "float", "default": 5},
                },
            },
            "artifact": {
                "type": "dict",
                "options": {"path": {"type": "str", "required": True}, "min_bytes": {"type": "int", "default": 0}},
            },
        },
    },
    "start": {"type": "str", "default": "auto", "choices": ["auto", "beginning", "end", "arm", "drain"]},
    "cursors": {"type": "dict"},
    "timeout": {"type": "float", "default": 3600},
    "stall_timeout": {"type": "float", "default": 0},
    "cmd_timeout": {"type": "int", "default": 30},
    "max_bytes": {"type": "int", "default": 2 * 1024 * 1024},
    "event_budget": {"type": "int", "default": 600000},
    "call_seconds": {"type": "float"},
    "transport_retries": {"type": "int", "default": 5},
    "keep_reader": {"type": "bool", "default": True},
    "fleet": {"type": "bool", "default": False},
    "save_dir": {"type": "path"},
    "state_dir": {"type": "path", "default": "~/.ansible/cvs_log_poll"},
    "state_key": {"type": "str", "no_log": False},
    "state_retention": {"type": "float", "default": 24 * 3600},
}
