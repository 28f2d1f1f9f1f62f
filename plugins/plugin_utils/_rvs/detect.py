# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the RVS run depends on: the RVS version (``rvs --version``; test levels need >= 1.3.0) and the folder of
RVS configurations for the node's GPUs, named after their market name in ``amd-smi static --json`` (read by
plugin_utils/_amd_smi.py). Preflight reads the RVS version with :func:`rvs_version_text` too.

Pure Python (>= 3.9), no Ansible import; runs on the controller (filters rvs_version_supports_levels and
gpu_config_folder).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._amd_smi import market_names, market_names_in_text
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import rvs_text

__all__ = [
    "RVS_LEVELS_MIN_VERSION",
    "gpu_config_folder",
    "parse_rvs_version",
    "rvs_version_supports_levels",
    "rvs_version_text",
]

#: First RVS release with test levels (``rvs -r 1..5``).
RVS_LEVELS_MIN_VERSION = (1, 3, 0)

# "1.3.0", "1.3", "1.3.0.60400", "1.6.75-rc1"; after the word "version" when there is one
_VERSION = r"(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?(?:[-+.~][0-9A-Za-z.]+)?"
_VERSION_AFTER_WORD = re.compile(r"version\D{0,20}?" + _VERSION, re.IGNORECASE)
_VERSION_ANYWHERE = re.compile(_VERSION)

_MARKET_MI = re.compile(r"\b(MI\d{3}[A-Z]?)(-HF)?\b", re.IGNORECASE)
_MARKET_RX = re.compile(r"\bRX\s*(\d{4})\s*(GRE)?\b", re.IGNORECASE)


def _version_match(version_text: Any) -> Optional[re.Match[str]]:
    try:
        text = rvs_text(version_text)
    except TypeError:
        return None
    return _VERSION_AFTER_WORD.search(text) or _VERSION_ANYWHERE.search(text)


def rvs_version_text(version_text: Any) -> Optional[str]:
    """The version ``rvs --version`` prints, as printed ("1.3.0", "1.3.0.60400"), or None."""
    m = _version_match(version_text)
    return m.string[m.start("major") : m.end()] if m else None


def parse_rvs_version(version_text: Any) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) from ``rvs --version`` output, or None."""
    m = _version_match(version_text)
    if not m:
        return None
    return int(m.group("major")), int(m.group("minor")), int(m.group("patch") or 0)


def rvs_version_supports_levels(version_text: Any) -> bool:
    """True when the RVS version printed by ``rvs --version`` is >= 1.3.0 (``rvs -r``)."""
    version = parse_rvs_version(version_text)
    return version is not None and version >= RVS_LEVELS_MIN_VERSION


def _folder_from_market_name(name: str) -> Optional[str]:
    m = _MARKET_MI.search(name)
    if m:
        return m.group(1).upper() + (m.group(2) or "").upper()
    m = _MARKET_RX.search(name)
    if m:
        return "RX" + m.group(1) + (m.group(2) or "").upper()
    return None


def gpu_config_folder(amd_smi_static_json: Any) -> Optional[str]:
    """RVS config sub-folder for the GPUs' market name, from ``amd-smi static -a -g 0 --json``.

    "AMD Instinct MI300X" -> "MI300X". Accepts the JSON text (any shape amd-smi prints, noise before the JSON
    tolerated), amd-smi's text output, or the already-decoded data. None when no known model is found.
    """
    names = market_names(amd_smi_static_json)
    if not names and isinstance(amd_smi_static_json, (str, bytes)):
        text = (
            amd_smi_static_json
            if isinstance(amd_smi_static_json, str)
            else amd_smi_static_json.decode("utf-8", "replace")
        )
        names = market_names_in_text(text)[:1]
    for name in names:
        folder = _folder_from_market_name(name)
        if folder:
            return folder
    return None
