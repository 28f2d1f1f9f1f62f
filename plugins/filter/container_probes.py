# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter container_probes: one probe record per node, the input of container_lifetime and container_rollback.

Documentation: container_probes.yml beside this file. Logic: plugins/plugin_utils/_container/lifetime.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._container.lifetime import probe_records


def container_probes(host_facts: Any, hosts: Any) -> list:
    return probe_records(list(host_facts or []), [str(h) for h in hosts or []])


class FilterModule:
    def filters(self) -> dict:
        return {"container_probes": container_probes}
