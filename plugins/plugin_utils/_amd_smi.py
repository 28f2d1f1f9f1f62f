# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading ``amd-smi static --json``: the one place that knows its shapes (used by preflight's facts and by the
RVS configuration folder, plugin_utils/_preflight.py and _rvs/detect.py).

amd-smi prints a list of per-GPU objects, ``{"gpu_data": [...]}`` (``gpus`` or ``data`` in some releases) or one
object, each GPU with sections such as ``asic`` (``market_name``), ``driver`` and ``vbios`` (``version``); key
case varies between releases, and warnings may come before the JSON. Without ``--json`` it prints
``MARKET_NAME: ...`` lines.

Pure logic, no Ansible imports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Callable, Optional

__all__ = ["decode_json", "gpu_field", "gpu_items", "market_names", "market_names_in_text"]

_LIST_KEYS = ("gpu_data", "gpus", "data")
_MARKET_NAME_LINE = re.compile(r"market[_ ]name\W{0,6}([^\"\n,}]+)", re.IGNORECASE)
#: how many "[" or "{" of a command's output are tried as the start of its JSON
MAX_JSON_STARTS = 50


def decode_json(text: Any, accept: Callable[[Any], bool] = lambda _value: True) -> Any:
    """The first JSON value in a command's output that ``accept`` takes (warnings may come before it), or None;
    already decoded data is returned as it is."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return text
    decoder = json.JSONDecoder()
    for start in [i for i, ch in enumerate(text) if ch in "[{"][:MAX_JSON_STARTS]:
        try:
            value = decoder.raw_decode(text, start)[0]
        except ValueError:
            continue
        if accept(value):
            return value
    return None


def _lower(data: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in data.items()}


def _items(data: Any) -> Optional[list[dict[str, Any]]]:
    if isinstance(data, Mapping):
        keys = _lower(data)
        for key in _LIST_KEYS:
            if isinstance(keys.get(key), list):
                return _items(keys[key])
        return [dict(data)] if {"gpu", "asic", "market_name"} & set(keys) else None
    if isinstance(data, list) and all(isinstance(d, Mapping) for d in data):
        return [dict(d) for d in data]
    return None


def gpu_items(output: Any) -> Optional[list[dict[str, Any]]]:
    """The per-GPU objects of ``amd-smi static --json`` output (text or decoded), None when it is not that JSON."""
    return _items(decode_json(output, lambda value: _items(value) is not None))


def gpu_field(gpu: Mapping[str, Any], section: str, key: str) -> Any:
    """``gpu[section][key]`` whatever the case of both keys, None when absent."""
    part = _lower(gpu).get(section)
    return _lower(part).get(key) if isinstance(part, Mapping) else None


def market_names(output: Any) -> list[str]:
    """Every GPU's market name (``asic.market_name``, or ``market_name`` of the GPU itself) in JSON output."""
    names = []
    for gpu in _items(decode_json(output, lambda value: bool(market_names(value)))) or []:
        name = gpu_field(gpu, "asic", "market_name") or _lower(gpu).get("market_name")
        if isinstance(name, str):
            names.append(name)
    return names


def market_names_in_text(text: str) -> list[str]:
    """Market names of amd-smi's text output (``MARKET_NAME: AMD Instinct MI300X``)."""
    return [m.group(1).strip() for m in _MARKET_NAME_LINE.finditer(text)]
