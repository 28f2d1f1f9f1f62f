# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Trust of the values an inventory plugin reads from a data file (ansible-core 2.19 data tagging).

ansible-core's own file inventories (yaml, ini, toml) mark what they read as trusted templates, so
``ansible-inventory --list`` and AWX's inventory import see plain values. A CVS cluster file holds data,
never Jinja: its values are trusted the same way, except a string with template syntax, which stays
untrusted so that it is never rendered (``{{ lookup('pipe', …) }}`` in a host name runs nothing).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

try:
    from ansible.template import trust_as_template as _trust
except ImportError:  # ansible-core < 2.19 has no trust tags: inventory values are plain already
    _trust = None

TEMPLATE_MARKERS = ("{{", "{%", "{#")


def has_template_syntax(text: str) -> bool:
    return any(marker in text for marker in TEMPLATE_MARKERS)


def trusted_data(value: Any, trust: Optional[Callable[[str], str]] = _trust) -> Any:
    """``value`` with every string trusted as a template unless it contains template syntax."""
    if isinstance(value, str):
        return value if trust is None or has_template_syntax(value) else trust(value)
    if isinstance(value, dict):
        return {trusted_data(k, trust): trusted_data(v, trust) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [trusted_data(v, trust) for v in value]
    return value
