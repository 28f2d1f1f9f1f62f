# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a run's results go on the controller when the user did not say (``cvs_results_dir`` unset).

The one rule, used by every playbook and role through the lookup ``cvs.cluster.results_dir``:

1. ``CVS_RESULTS_DIR`` in the controller's environment;
2. under ansible-runner / AWX, ``cvs-results`` inside the job's artifact directory (runner exports it as
   ``AWX_ISOLATED_DATA_DIR``; the streaming worker sends that directory back with the job's artifacts);
3. a playbook of an *installed* collection (its root has ``MANIFEST.json``): ``cvs-results`` in the current
   working directory, never inside the collection;
4. a playbook of a source checkout of this collection (its root has ``galaxy.yml``): ``<checkout>/results``
   (ignored by git and by ``ansible-galaxy collection build``);
5. any other playbook: ``<playbook_dir>/../results``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

RESULTS_ENV = "CVS_RESULTS_DIR"
RUNNER_ARTIFACTS_ENV = "AWX_ISOLATED_DATA_DIR"


def _collection_root(start: str) -> tuple[Optional[str], Optional[str]]:
    """(root, kind) of the collection holding ``start``: kind 'installed' (MANIFEST.json) or 'source'."""
    path = os.path.abspath(start)
    while True:
        if os.path.isfile(os.path.join(path, "MANIFEST.json")):
            return path, "installed"
        if os.path.isfile(os.path.join(path, "galaxy.yml")):
            return path, "source"
        parent = os.path.dirname(path)
        if parent == path:
            return None, None
        path = parent


def default_results_dir(playbook_dir: Optional[str], environ: Mapping[str, str], cwd: str) -> str:
    if environ.get(RESULTS_ENV):
        return os.path.abspath(os.path.expanduser(environ[RESULTS_ENV]))
    if environ.get(RUNNER_ARTIFACTS_ENV):
        return os.path.join(os.path.abspath(environ[RUNNER_ARTIFACTS_ENV]), "cvs-results")
    base = os.path.abspath(playbook_dir or cwd)
    root, kind = _collection_root(base)
    if kind == "installed":
        return os.path.join(os.path.abspath(cwd), "cvs-results")
    if kind == "source" and root is not None:
        return os.path.join(root, "results")
    return os.path.normpath(os.path.join(base, "..", "results"))
