# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Node checks of the cvs.cluster.maxtext role, run with the training interpreter:
#   <maxtext_python> -c "<this file>" '<request JSON>'
# Prints one JSON object: what was found and a list of [field, problem] pairs. Changes nothing.
from __future__ import annotations

import difflib
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


def module_file(module):
    """The file of a module on this interpreter's path, found without importing anything ('' when none)."""
    if not module:
        return ""
    parts = module.split(".")
    for entry in sys.path:
        path = os.path.join(entry or os.getcwd(), *parts) + ".py"
        if os.path.isfile(path):
            return path
    return ""


def given_config(req):
    """({key: the setting that passed it}, {key: value}) of what the user set: maxtext_config_overrides, then
    maxtext_extra_args of the form key=value (they come later on the command line, so they win)."""
    keys, config = {}, {"dataset_type": req.get("dataset_type", "")}
    for key, value in (req.get("overrides") or {}).items():
        keys[str(key)] = "maxtext_config_overrides"
        config[str(key)] = value
    for arg in req.get("extra_args") or []:
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", str(arg), re.S)
        if match:
            keys[match.group(1)] = "maxtext_extra_args"
            config[match.group(1)] = match.group(2)
    return keys, config


# dataset_type -> the config keys that it needs non-empty (MaxText's base.yml names them)
DATASET_KEYS = {"hf": ["hf_path"], "grain": ["grain_train_files"], "tfds": ["dataset_path"]}


def config_problems(base, keys, config):
    """Keys the base config does not know (named with the setting that passed them and the closest known key),
    and a dataset_type whose data setting is empty. Skipped when the interpreter has no YAML parser."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return []
    try:
        with open(base, encoding="utf-8") as handle:
            known = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        return [["maxtext_base_config", f"{base} cannot be read as YAML: {exc}"]]
    if not isinstance(known, dict):
        return [["maxtext_base_config", f"{base} is not a mapping of config keys"]]
    problems = []
    for key, where in keys.items():
        if key == "base_config" or key in known:
            continue
        close = difflib.get_close_matches(key, [str(k) for k in known], n=1)
        problems.append(
            [
                where,
                f"MaxText config key {key!r} is not known to the installed MaxText ({base})"
                + (f"; did you mean {close[0]!r}?" if close else ""),
            ]
        )
    dataset = str(config.get("dataset_type", known.get("dataset_type", "")))
    for key in DATASET_KEYS.get(dataset, []):
        if not str(config.get(key, known.get(key, "")) or "").strip():
            problems.append(
                [
                    "maxtext_dataset_type",
                    f"dataset_type {dataset} needs {key}, which is empty (set it in maxtext_config_overrides)",
                ]
            )
    return problems


def main():
    req = json.loads(sys.argv[1])
    problems = []
    found = {"python": sys.executable, "python_version": ".".join(str(v) for v in sys.version_info[:3])}

    if os.path.exists(req["run_dir"]):
        problems.append(["cvs_scratch", f"the run directory {req['run_dir']} exists already (runs never share one)"])

    scripts = [s for s in req["train_scripts"] if s]
    train = next((s for s in scripts if os.path.isfile(s)), "") or module_file(req.get("train_module") or "")
    found["train_script"] = train
    if not train:
        module = req.get("train_module") or ""
        problems.append(
            [
                "maxtext_train_scripts",
                f"no train script at any configured path ({', '.join(scripts)})"
                + (f" and no module {module} on {sys.executable}'s path" if module else ""),
            ]
        )
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
        elif base:
            problems.extend(config_problems(base, *given_config(req)))

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
