"""Make `ansible_collections.cvs.cluster` importable from this checkout."""

from __future__ import annotations

import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parent.parent / ".cache" / "collections"
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
