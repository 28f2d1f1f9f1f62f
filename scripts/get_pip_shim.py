"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test fetches get-pip-<version>.py from a CI file server this machine
cannot reach. This shim does the same job with the standard library's
ensurepip and then installs the requested packages (pip==<version>) from the
package index pip is configured for. scripts/sanity.sh puts it in
ansible-test's cache before running sanity tests.
"""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def trust_store() -> str | None:
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def main(argv: list[str]) -> int:
    ensurepip.bootstrap(upgrade=True, default_pip=True)  # sets PIP_CONFIG_FILE=/dev/null in os.environ
    # ansible-test runs pip with a trimmed environment; keep the machine's CA bundle for this venv's pip
    cert = trust_store()
    if cert and sys.prefix != sys.base_prefix:
        with open(os.path.join(sys.prefix, "pip.conf"), "w") as fh:
            fh.write(f"[global]\ncert = {cert}\n")
    args = [a for a in argv if a not in GET_PIP_ONLY]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_IGNORE") and k != "PIP_CONFIG_FILE"}
    return subprocess.call([sys.executable, "-m", "pip", "install", *args], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
