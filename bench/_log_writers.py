# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load on the nodes' logs: a log of real 128-byte lines written on the node itself, and 1 KiB appends
per round (cvs_bench's log_block), locally on a shared filesystem or over ssh.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from _cluster import Host, shared_filesystem, ssh, ssh_argv
from _env import CALLBACKS

sys.path.insert(0, str(CALLBACKS))
from cvs_bench import log_block

MAKE_LOG = r"""
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
line = ("completed step: {step}, seconds: 1.234, TFLOP/s/device: 187.654, Tokens/s/device: 4821.330, "
        "total_weights: 65536, loss: 5.4321")
block = "".join(line.format(step=i)[:127].ljust(127) + "\n" for i in range(8192)).encode()  # 1 MiB
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".tmp", "wb") as fh:
    left = size
    while left > 0:
        fh.write(block[: min(left, len(block))])
        left -= len(block)
    fh.flush()
    os.fsync(fh.fileno())  # no writeback of the new file during the measurements
os.replace(path + ".tmp", path)
print(os.path.getsize(path))
"""


def make_remote_log(host: Host, path: str, size: int) -> None:
    """A log of real 128-byte lines, size bytes (a multiple of 128), written on the node itself."""
    size -= size % 128
    out = ssh(host, f"python3 - {shlex.quote(path)} {size}", stdin=MAKE_LOG.encode(), timeout=900)
    if int(out.strip()) != size:
        raise RuntimeError(f"made {out.strip()} bytes, wanted {size}")


class Appender:
    """Appends 1 KiB of log lines to remote logs: directly when the file is shared with the controller,
    else over ssh (one exec per append, outside any timed section)."""

    def __init__(self, host: Host, path: str, size: int = 1024) -> None:
        self.host, self.path, self.block = host, path, log_block(size)
        self.local = shared_filesystem(host, path)

    def append(self, data: bytes | None = None) -> None:
        data = self.block if data is None else data
        if self.local:
            with open(self.path, "ab") as fh:
                fh.write(data)
        else:
            ssh(self.host, f"cat >> {shlex.quote(self.path)}", stdin=data)

    def callback_env(self, task: str) -> dict:
        """Env for the cvs_bench callback to append one block per retry of task (shared filesystem only)."""
        if not self.local:
            return {}
        return {"CVS_BENCH_APPEND": json.dumps({"task": task, "path": self.path, "bytes": len(self.block)})}

    def start_background(self, interval: float) -> subprocess.Popen | None:
        """Non-shared filesystems only: append one block every interval seconds from a loop on the node."""
        if self.local:
            return None
        block = f"{self.path}.block"
        ssh(self.host, f"cat > {shlex.quote(block)}", stdin=self.block)
        loop = f"while echo .; do cat {shlex.quote(block)} >> {shlex.quote(self.path)}; sleep {interval}; done"
        return subprocess.Popen(ssh_argv(self.host, loop), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_background(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)
