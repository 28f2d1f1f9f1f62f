# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's RVS tests run one after another (runs on the node; stdlib only).

``cvs.cluster.rvs_run`` calls :func:`run_tests` under ``async``: each test's argv runs without a shell until it ends
or its deadline passes; the plan (``plugin_utils/_rvs/plan.py``) makes each argv ``timeout -k <grace> <timeout> rvs
...``, so the deadline only ends a test that even SIGKILL did not end. Output is read as bytes and bounded whatever it
holds (``_process.py``), so the module's result, and the async job file it becomes, stays small and valid JSON.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.cvs.cluster.plugins.module_utils._process import Capture, drain, start

#: Seconds to collect what a killed test printed before giving up on its output.
DRAIN_SECONDS = 10


def run_test(name: str, argv: Sequence[str], deadline: float) -> Dict[str, Any]:
    """Run one test's command to its end or its deadline; ``rc`` is None when it did not end by itself.

    Its output is read as bytes and bounded (``_process.Capture``): ``stdout``/``stderr`` are text whatever the
    tool printed, ``stdout_cut``/``stderr_cut`` the bytes of each that were not kept (0 when all was)."""
    started = datetime.datetime.now()
    result: Dict[str, Any] = {
        "name": name,
        "rc": None,
        "stdout": "",
        "stderr": "",
        "stdout_cut": 0,
        "stderr_cut": 0,
        "delta": None,
        "msg": None,
    }
    try:
        proc = start(argv)
    except OSError as exc:
        result.update(msg=f"{argv[0]}: {exc.strerror or exc}", delta=str(datetime.datetime.now() - started))
        return result
    out, err = Capture(), Capture()
    if drain(proc, (out, err), deadline):
        result["rc"] = proc.returncode
    else:
        proc.kill()
        # a child that outlived the kill may hold the output open: what came until then is kept
        drain(proc, (out, err), DRAIN_SECONDS)
        result["msg"] = f"still running {deadline:g} s after it started; killed and not waited for"
    stdout, stdout_cut = out.text()
    stderr, stderr_cut = err.text()
    result.update(
        stdout=stdout,
        stderr=stderr,
        stdout_cut=stdout_cut,
        stderr_cut=stderr_cut,
        delta=str(datetime.datetime.now() - started),
    )
    return result


def run_tests(tests: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    return [run_test(str(t["name"]), [str(a) for a in t["argv"]], float(t["deadline"])) for t in tests]
