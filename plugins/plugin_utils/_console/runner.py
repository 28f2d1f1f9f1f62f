# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which stdout callback ansible-runner's display wrapper should wrap, when the user chose it in ansible.cfg.

ansible-runner replaces ``ANSIBLE_STDOUT_CALLBACK`` with its ``awx_display`` callback and wraps the callback that
variable named before, passed on as ``ORIGINAL_STDOUT_CALLBACK``; a ``stdout_callback`` set only in an
``ansible.cfg`` is lost, and the wrapper falls back to ``default``. The configured name is recovered from the
ini file Ansible itself loaded.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from typing import Optional

RUNNER_CALLBACK = "awx_display"


def configured_stdout_callback(config_file: Optional[str]) -> Optional[str]:
    """``[defaults] stdout_callback`` of the ini file, or None."""
    if not config_file:
        return None
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"))
    try:
        parser.read(config_file, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    value = parser.get("defaults", "stdout_callback", fallback="").strip()
    return value or None


def wrapped_callback(environ: Mapping[str, str], config_file: Optional[str]) -> Optional[str]:
    """The value ``ORIGINAL_STDOUT_CALLBACK`` must take, or None to leave the environment alone."""
    if environ.get("ANSIBLE_STDOUT_CALLBACK") != RUNNER_CALLBACK or environ.get("ORIGINAL_STDOUT_CALLBACK"):
        return None
    configured = configured_stdout_callback(config_file)
    return configured if configured and configured != RUNNER_CALLBACK else None
