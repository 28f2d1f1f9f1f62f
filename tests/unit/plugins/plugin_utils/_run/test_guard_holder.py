"""The guard holder's reading of the ssh session (plugin_utils/_run/guard_holder.py)."""

from __future__ import annotations

import os
import selectors
from types import SimpleNamespace

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.guard_holder import _drain_split


def test_the_end_of_stdout_does_not_hide_what_stderr_says() -> None:
    # ssh failing: its stdout ends (first here) and its stderr holds the reason; both are ready in the same select
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.close(out_w)
    os.write(err_w, b"ssh: connect to host n1 port 22: Connection refused\n")
    os.close(err_w)
    stdout, stderr = os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
    proc = SimpleNamespace(stdout=stdout, stderr=stderr)
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        selector.register(stderr, selectors.EVENT_READ)
        assert _drain_split(proc, selector, 0.5, out, err) is False  # type: ignore[arg-type]
    stdout.close()
    stderr.close()
    assert bytes(err) == b"ssh: connect to host n1 port 22: Connection refused\n"
    assert bytes(out) == b""
