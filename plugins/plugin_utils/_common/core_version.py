# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ansible-core releases cvs.cluster is tested with, and the warning a run on any other one starts with.

meta/runtime.yml's ``requires_ansible`` is the floor Galaxy and ansible-core enforce; this range is what CI runs.
On another release a plugin may fail deep inside ansible-core's internals, so the run first says which release it
found and which ones are tested. The stdout callback ``cvs.cluster.cvs`` (at the playbook's start) and the vars
plugin ``cvs.cluster.runner_console`` (when it is loaded, right after the inventory) both warn; ansible-core shows a
warning once per run.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ansible.release import __version__ as RUNNING_CORE

# first and last ansible-core release (major, minor) that CI runs the collection on
TESTED_ANSIBLE_CORE: tuple[tuple[int, int], tuple[int, int]] = ((2, 19), (2, 21))

_RELEASE_RE = re.compile(r"(\d+)\.(\d+)")


def core_release(version: str) -> Optional[tuple[int, int]]:
    """(major, minor) of an ansible-core version string (``2.19.14``, ``2.21.0rc1``, ``2.22.0.dev0``)."""
    match = _RELEASE_RE.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def untested_core_message(
    version: str, tested: tuple[tuple[int, int], tuple[int, int]] = TESTED_ANSIBLE_CORE
) -> Optional[str]:
    """The warning for ansible-core ``version`` outside ``tested``; None within it."""
    low, high = tested
    release = core_release(version)
    if release is not None and low <= release <= high:
        return None
    first, last = f"{low[0]}.{low[1]}", f"{high[0]}.{high[1]}"
    return (
        f"cvs.cluster is tested with ansible-core {first} to {last}, and this is ansible-core {version}: "
        f"an error in this run may come from that. Install a tested release "
        f"(pip install 'ansible-core>={first},<{high[0]}.{high[1] + 1}')."
    )


def warn_if_untested_core(display: Any, version: str = RUNNING_CORE) -> Optional[str]:
    """Warn through ``display`` when ansible-core ``version`` (the running one) is outside the tested range.

    Returns the message, or None.
    """
    message = untested_core_message(version)
    if message:
        display.warning(message)
    return message
