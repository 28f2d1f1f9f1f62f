# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter node_table. Documentation: node_table.yml beside this file. Logic: plugins/plugin_utils/_run/node_facts.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.node_facts import node_table as _node_table


def node_table(hosts: Iterable[Any]) -> list[str]:
    hosts = list(hosts)
    if not all(isinstance(values, Mapping) for values in hosts):
        raise AnsibleFilterError("cvs.cluster.node_table expects the hosts' variables (map('extract', hostvars))")
    return _node_table(hosts)


class FilterModule:
    def filters(self) -> dict:
        return {"node_table": node_table}
