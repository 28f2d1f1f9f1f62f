# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Commands the collection's modules run on a node themselves, without a shell (runs on the node; stdlib only).

ansible-test's pylint asks modules for ``AnsibleModule.run_command`` instead of :mod:`subprocess`; these callers
need what it lacks, a deadline that kills the command (the probes, the RVS tests), so this is the one place that
starts processes directly.
"""

from __future__ import annotations

import subprocess
from typing import Any, Dict, Mapping, Optional, Sequence

TimeoutExpired = subprocess.TimeoutExpired


def start(argv: Sequence[str]) -> subprocess.Popen:
    """``argv`` started with no input and both outputs piped (the caller waits, with its own deadline)."""
    return subprocess.Popen(  # pylint: disable=ansible-bad-function
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def run_command(argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Run one read-only command to its end or ``timeout``; a missing program or a timeout is reported in
    ``problem``, never raised. Output is decoded as UTF-8, invalid bytes replaced."""
    try:
        done = subprocess.run(  # pylint: disable=ansible-bad-function
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]} did not answer within {timeout:g} s"}
    except OSError as exc:
        return {"rc": None, "stdout": "", "stderr": "", "problem": f"{argv[0]}: {exc.strerror or exc}"}
    return {
        "rc": done.returncode,
        "stdout": done.stdout.decode("utf-8", "replace"),
        "stderr": done.stderr.decode("utf-8", "replace"),
        "problem": None,
    }
