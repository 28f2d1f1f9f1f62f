# Copyright: cvs.cluster contributors
# Apache License 2.0 (see galaxy.yml)
# Node checks of the cvs.cluster.maxtext role, run with the training interpreter:
#   <maxtext_python> -c "<this file>" '<request JSON>'
# Prints one JSON object: what was found and a list of [field, problem] pairs. Changes nothing.
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys


def run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""


def local_addresses():
    """Map of IPv4/IPv6 address -> interface, from `ip -o addr`."""
    found = {}
    for line in run(["ip", "-o", "addr", "show"]).splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("inet", "inet6"):
            found[parts[3].split("/")[0]] = parts[1].split("@")[0]
    return found


def interface_towards(address):
    """The interface that carries traffic to address (the one holding it when it is local)."""
    owner = local_addresses().get(address)
    if owner and owner != "lo":
        return owner
    match = re.search(r"\bdev\s+(\S+)", run(["ip", "-o", "route", "get", address]))
    if match and match.group(1) != "lo":
        return match.group(1)
    return ""


def port_holders(port):
    """Listeners on a TCP port as `ss` shows them (best effort, for the message)."""
    out = run(["ss", "-Htlnp", f"sport = :{port}"])
    return " | ".join(" ".join(line.split()) for line in out.splitlines()[:3])


def port_in_use(port):
    """True when a TCP listener holds the port (TIME_WAIT leftovers do not count, as for the coordinator)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno in (98, 48):  # EADDRINUSE (Linux, BSD)
                return True
        finally:
            sock.close()
    return False


# MaxText >= 26.4 keeps train.py in <checkout>/src/maxtext/trainers/pre_train/ and its configs in
# <checkout>/src/maxtext/configs/; older releases keep both in <checkout>/[src/]MaxText/.
_PACKAGED_TRAINER = ("maxtext", "trainers", "pre_train")


def maxtext_layout(train):
    """(directory relative config paths start from, default working directory, directory holding the
    packages train.py imports) for a train script."""
    script_dir = os.path.dirname(train)
    parts = script_dir.split(os.sep)
    if tuple(parts[-3:]) == _PACKAGED_TRAINER:
        package = os.sep.join(parts[:-2])
        packages = os.path.dirname(package)
        checkout = os.path.dirname(packages) if os.path.basename(packages) == "src" else packages
        return package, checkout, packages
    return script_dir, os.path.dirname(script_dir), os.path.dirname(script_dir)


def main():
    req = json.loads(sys.argv[1])
    problems = []
    found = {"python": sys.executable, "python_version": ".".join(str(v) for v in sys.version_info[:3])}

    if os.path.exists(req["run_dir"]):
        problems.append(["cvs_scratch", f"the run directory {req['run_dir']} exists already (runs never share one)"])

    scripts = [s for s in req["train_scripts"] if s]
    train = next((s for s in scripts if os.path.isfile(s)), "")
    found["train_script"] = train
    if not train:
        problems.append(["maxtext_train_scripts", f"no train script at any configured path ({', '.join(scripts)})"])
    else:
        config_root, checkout, packages = maxtext_layout(train)
        found["workdir"] = req["workdir"] or checkout
        found["python_path"] = req["workdir"] or packages
        if not os.path.isdir(found["workdir"]):
            problems.append(["maxtext_workdir", f"{found['workdir']} is not a directory"])
        base = req["base_config"]
        if base and not os.path.isabs(base):
            base = os.path.normpath(os.path.join(config_root, base))
        found["base_config"] = base
        if base and not os.path.isfile(base):
            problems.append(["maxtext_base_config", f"{base} does not exist (train script: {train})"])

    for field in ("tokenizer_path", "model_dir"):
        path = req.get(field) or ""
        if path.startswith("/") and not os.path.exists(path):
            problems.append(["maxtext_" + field, f"{path} does not exist"])

    if req["distributed"]:
        host = req["coordinator"]
        try:
            infos = socket.getaddrinfo(host, req["port"], 0, socket.SOCK_STREAM)
            address = infos[0][4][0]
        except (OSError, IndexError) as exc:
            address = ""
            problems.append(["maxtext_coordinator_address", f"cannot resolve {host}: {exc}"])
        found["coordinator_ip"] = address
        iface = req["interface"]
        if iface:
            if not os.path.exists("/sys/class/net/" + iface):
                problems.append(["maxtext_network_interface", f"interface {iface} does not exist"])
        elif address:
            iface = interface_towards(address)
            if not iface:
                problems.append(
                    [
                        "maxtext_network_interface",
                        f"found no interface towards the coordinator {address}; set maxtext_network_interface",
                    ]
                )
        found["interface"] = iface
        if req["check_port"] and port_in_use(req["port"]):
            holders = port_holders(req["port"])
            problems.append(
                [
                    "maxtext_coordinator_port",
                    f"port {req['port']} is already in use on the coordinator node"
                    + (f" ({holders})" if holders else ""),
                ]
            )
    found["problems"] = problems
    print(json.dumps(found))


if __name__ == "__main__":
    main()
