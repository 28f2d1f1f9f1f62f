# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Creates a fresh run directory of the cvs.cluster.maxtext role and writes its files in one go:
#   <python> -c "<this file>" '{"dir": "...", "files": [{"name": "env.sh", "content": "...", "mode": "0644"}],
#                               "dirs": ["other directories the run needs, kept when they exist"]}'
# The directory must not exist yet (a run never reuses one). Prints a JSON summary.
from __future__ import annotations

import json
import os
import sys


def main() -> None:
    req = json.loads(sys.argv[1])
    run_dir = req["dir"]
    parent = os.path.dirname(run_dir.rstrip("/"))
    os.makedirs(parent, mode=0o755, exist_ok=True)
    try:
        os.mkdir(run_dir, 0o755)
    except FileExistsError:
        sys.stderr.write(f"the run directory {run_dir} exists already (runs never share one)\n")
        sys.exit(1)
    for extra in req.get("dirs", []):
        os.makedirs(extra, mode=0o755, exist_ok=True)
    written = []
    for item in req["files"]:
        name = item["name"]
        if "/" in name or name in (".", ".."):
            sys.stderr.write(f"bad file name {name!r}\n")
            sys.exit(1)
        path = os.path.join(run_dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(item["content"])
        os.chmod(tmp, int(item["mode"], 8))
        os.replace(tmp, path)
        written.append(name)
    print(json.dumps({"dir": run_dir, "written": written}))


main()
