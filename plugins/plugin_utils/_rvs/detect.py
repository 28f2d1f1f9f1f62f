# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the RVS run depends on: the RVS version (``rvs --version``; test levels need >= 1.3.0) and the GPU model
from ``amd-smi static --json``, which names the folder of RVS configurations to use.

Pure Python (>= 3.9), no Ansible import; runs on the controller (filters rvs_version_supports_levels and
gpu_config_folder).
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import rvs_text

__all__ = [
    "RVS_LEVELS_MIN_VERSION",
    "gpu_config_folder",
    "parse_rvs_version",
    "rvs_version_supports_levels",
]

#: First RVS release with test levels (``rvs -r 1..5``).
RVS_LEVELS_MIN_VERSION = (1, 3, 0)

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_VERSION_AFTER_WORD = re.compile(r"version\D{0,20}?(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE)

_MARKET_MI = re.compile(r"\b(MI\d{3}[A-Z]?)(-HF)?\b", re.IGNORECASE)
_MARKET_RX = re.compile(r"\bRX\s*(\d{4})\s*(GRE)?\b", re.IGNORECASE)
_MARKET_NAME_TEXT = re.compile(r"market[_ ]name\W{0,6}([^\"\n,}]+)", re.IGNORECASE)


def parse_rvs_version(version_text: Any) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) from ``rvs --version`` output, or None."""
    try:
        text = rvs_text(version_text)
    except TypeError:
        return None
    m = _VERSION_AFTER_WORD.search(text) or _VERSION.search(text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def rvs_version_supports_levels(version_text: Any) -> bool:
    """True when the RVS version printed by ``rvs --version`` is >= 1.3.0 (``rvs -r``)."""
    version = parse_rvs_version(version_text)
    return version is not None and version >= RVS_LEVELS_MIN_VERSION


def _market_names(data: Any) -> list[str]:
    """market_name values in amd-smi static JSON (list, dict, or {"gpu_data": [...]})."""
    if isinstance(data, list):
        names = []
        for item in data:
            names.extend(_market_names(item))
        return names
    if not isinstance(data, dict):
        return []
    lower = {str(k).lower(): v for k, v in data.items()}
    for key in ("gpu_data", "gpus", "data"):
        if isinstance(lower.get(key), list):
            return _market_names(lower[key])
    asic = lower.get("asic")
    if isinstance(asic, dict):
        asic_lower = {str(k).lower(): v for k, v in asic.items()}
        if isinstance(asic_lower.get("market_name"), str):
            return [asic_lower["market_name"]]
    if isinstance(lower.get("market_name"), str):
        return [lower["market_name"]]
    return []


def _folder_from_market_name(name: str) -> Optional[str]:
    m = _MARKET_MI.search(name)
    if m:
        return m.group(1).upper() + (m.group(2) or "").upper()
    m = _MARKET_RX.search(name)
    if m:
        return "RX" + m.group(1) + (m.group(2) or "").upper()
    return None


def gpu_config_folder(amd_smi_static_json: Any) -> Optional[str]:
    """RVS config sub-folder for the GPU model, from ``amd-smi static -a -g 0 --json``.

    "AMD Instinct MI300X" -> "MI300X". Accepts the JSON text (list, dict or
    ``{"gpu_data": [...]}`` shapes, tolerating noise before the JSON) or the
    already-decoded data. None when no known model is found.
    """
    data: Any = amd_smi_static_json
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if isinstance(data, str):
        text = data
        data = None
        decoder = json.JSONDecoder()
        starts = [i for i, ch in enumerate(text) if ch in "[{"][:50]
        for start in starts:
            try:
                candidate, _end = decoder.raw_decode(text, start)
            except ValueError:
                continue
            if _market_names(candidate):
                data = candidate
                break
        if data is None:
            m = _MARKET_NAME_TEXT.search(text)
            return _folder_from_market_name(m.group(1)) if m else None
    for name in _market_names(data):
        folder = _folder_from_market_name(name)
        if folder:
            return folder
    return None
