# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's RVS tests run one after another (runs on the node; stdlib only).

``cvs.cluster.rvs_run`` calls :func:`run_tests` under ``async``: each test's argv runs without a shell until it ends
or its deadline passes; the plan (``plugin_utils/_rvs/plan.py``) makes each argv ``timeout -k <grace> <timeout> rvs
...``, so the deadline only ends a test that even SIGKILL did not end.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.cvs.cluster.plugins.module_utils._process import TimeoutExpired, start

#: Seconds to collect what a killed test printed before giving up on its output.
DRAIN_SECONDS = 10


def _text(data: Any) -> str:
    return (data or b"").decode("utf-8", "replace").rstrip("\r\n")


def run_test(name: str, argv: Sequence[str], deadline: float) -> Dict[str, Any]:
    """Run one test's command to its end or its deadline; ``rc`` is None when it did not end by itself."""
    started = datetime.datetime.now()
    result: Dict[str, Any] = {"name": name, "rc": None, "stdout": "", "stderr": "", "delta": None, "msg": None}
    try:
        proc = start(argv)
    except OSError as exc:
        result.update(msg=f"{argv[0]}: {exc.strerror or exc}", delta=str(datetime.datetime.now() - started))
        return result
    try:
        out, err = proc.communicate(timeout=deadline)
        result["rc"] = proc.returncode
    except TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=DRAIN_SECONDS)
        except TimeoutExpired:  # a child that outlived the kill still holds the output open
            out, err = b"", b""
        result["msg"] = f"still running {deadline:g} s after it started; killed and not waited for"
    result.update(stdout=_text(out), stderr=_text(err), delta=str(datetime.datetime.now() - started))
    return result


def run_tests(tests: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    return [run_test(str(t["name"]), [str(a) for a in t["argv"]], float(t["deadline"])) for t in tests]
