#!/usr/bin/env python3
"""Install the collections this one depends on into .cache/collections.

Galaxy first; when it does not answer, the collections are taken from the
PyPI wheel of the `ansible` bundle (only the folders we need are extracted).
The checkout itself is linked in as ansible_collections/cvs/cluster.
Idempotent: a stamp records what was installed from which requirements.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / ".cache" / "collections"
STAMP = DEST / ".installed"
# The ansible bundle release whose ansible-core (2.19) matches requirements.txt.
BUNDLE = "ansible==12.3.0"
WANTED = ("community/docker", "community/library_inventory_filtering_v1")


def requirements_digest() -> str:
    data = (ROOT / "requirements.yml").read_bytes() + BUNDLE.encode()
    return hashlib.sha256(data).hexdigest()


def link_self() -> None:
    link = DEST / "ansible_collections" / "cvs" / "cluster"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and link.resolve() == ROOT:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(ROOT, target_is_directory=True)


def installed() -> bool:
    have = all((DEST / "ansible_collections" / w / "MANIFEST.json").exists() for w in WANTED[:1])
    return have and STAMP.exists() and STAMP.read_text().strip() == requirements_digest()


def from_galaxy() -> bool:
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    cmd = [
        str(galaxy),
        "collection",
        "install",
        "-r",
        str(ROOT / "requirements.yml"),
        "-p",
        str(DEST),
        "--timeout",
        "15",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"galaxy not usable ({exc}); falling back to the ansible wheel")
        return False
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["unknown error"]
        print(f"galaxy install failed ({reason[0]}); falling back to the ansible wheel")
        return False
    return True


def from_wheel() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", BUNDLE, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        prefixes = tuple(f"ansible_collections/{w}/" for w in WANTED)
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.startswith(prefixes):
                    zf.extract(name, DEST)


def main() -> int:
    DEST.mkdir(parents=True, exist_ok=True)
    link_self()
    if installed():
        return 0
    for w in WANTED:
        shutil.rmtree(DEST / "ansible_collections" / w, ignore_errors=True)
    if os.environ.get("CVS_SKIP_GALAXY") or not from_galaxy():
        from_wheel()
    STAMP.write_text(requirements_digest() + "\n")
    print(f"collections installed into {DEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
