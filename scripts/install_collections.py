#!/usr/bin/env python3
"""Install the collections this one depends on into .cache/collections.

Galaxy first; when it does not answer, the collections are taken from the
PyPI wheel of the `ansible` bundle (only the folders we need are extracted).
The checkout itself is linked in as ansible_collections/cvs/cluster.
Idempotent: a stamp records what was installed from which requirements.

``--dest DIR --bundle ansible==X`` installs another controller line's set
(scripts/controller_line.sh); run it with that line's Python, whose
ansible-galaxy and pip it uses.
"""

from __future__ import annotations

import argparse
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


def requirements_digest(bundle: str) -> str:
    data = (ROOT / "requirements.yml").read_bytes() + bundle.encode()
    return hashlib.sha256(data).hexdigest()


def link_self(dest: Path) -> None:
    link = dest / "ansible_collections" / "cvs" / "cluster"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and link.resolve() == ROOT:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(ROOT, target_is_directory=True)


def installed(dest: Path, bundle: str) -> bool:
    stamp = dest / STAMP.name
    have = all((dest / "ansible_collections" / w / "MANIFEST.json").exists() for w in WANTED[:1])
    return have and stamp.exists() and stamp.read_text().strip() == requirements_digest(bundle)


def from_galaxy(dest: Path) -> bool:
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    cmd = [
        str(galaxy),
        "collection",
        "install",
        "-r",
        str(ROOT / "requirements.yml"),
        "-p",
        str(dest),
        "--timeout",
        "15",
    ]
    # only dest counts as installed: another configured path (ansible.cfg's) would make galaxy install nothing
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(dest)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"galaxy not usable ({exc}); falling back to the ansible wheel")
        return False
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["unknown error"]
        print(f"galaxy install failed ({reason[0]}); falling back to the ansible wheel")
        return False
    return True


def from_wheel(dest: Path, bundle: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", bundle, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        prefixes = tuple(f"ansible_collections/{w}/" for w in WANTED)
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.startswith(prefixes):
                    zf.extract(name, dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEST, help="collections path to fill (default: %(default)s)")
    parser.add_argument("--bundle", default=BUNDLE, help="the ansible release to extract from (default: %(default)s)")
    args = parser.parse_args(argv)
    dest: Path = args.dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    link_self(dest)
    if installed(dest, args.bundle):
        return 0
    for w in WANTED:
        shutil.rmtree(dest / "ansible_collections" / w, ignore_errors=True)
    if os.environ.get("CVS_SKIP_GALAXY") or not from_galaxy(dest):
        from_wheel(dest, args.bundle)
    (dest / STAMP.name).write_text(requirements_digest(args.bundle) + "\n")
    print(f"collections installed into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
