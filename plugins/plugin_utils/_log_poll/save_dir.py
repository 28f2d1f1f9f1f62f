# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""log_poll's ``save_dir``: every byte a host's rounds read, per log (the round engine's sink)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.paths import path_component
from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import LogSpec


class SaveDir:
    """save_dir: every byte read, per host and log (``<save_dir>/<host>/<label>.log``)."""

    def __init__(self, save_dir: str | None, host: str, logs: Sequence[LogSpec]) -> None:
        # one directory per host, whatever its name holds ('/', '..', 253-character FQDNs with a suffix)
        self._paths = {
            s.label: os.path.join(save_dir, path_component(host), path_component(s.label + ".log")) for s in logs
        } if save_dir else {}  # fmt: skip

    def reset(self) -> None:
        for path in self._paths.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb"):
                pass

    def append(self, label: str, raw: bytes) -> None:
        path = self._paths.get(label)
        if path:
            with open(path, "ab") as fh:
                fh.write(raw)
