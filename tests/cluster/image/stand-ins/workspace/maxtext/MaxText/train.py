#!/usr/bin/env python3
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for MaxText's MaxText/train.py (test fixture, stdlib only).

Invoked like MaxText::

    python3 /workspace/maxtext/MaxText/train.py MaxText/configs/base.yml steps=20 run_name=x \
        base_output_directory=/tmp/out

``steps`` comes from a ``key=value`` override first, else from the config's
top-level ``steps:`` line, else 10. Output imitates MaxText: absl-prefixed
startup lines, then one ``completed step: N, ...`` line per step on stdout.
Like MaxText, the line of step N is written when step N+1 is recorded
(dispatched) and the last one when the run shuts down. Crash blocks and
tracebacks go to stderr, as the real ones do; run it with ``2>&1``.

Faults come from ``$CVS_STAND_IN_DIR/maxtext.json`` (default directory
``/root/.cvs-stand-in``; a missing file means a healthy run), for example::

    {"nan_at_step": 5, "crash_at_step": 7, "hang_at_step": 4, "traceback_after_last": true,
     "slow_factor": 4.0, "exit_code": 0, "step_seconds": 0.05}

* ``nan_at_step``: loss is ``nan`` (or ``nan_value``: "inf", "-inf") from that step on; training goes on.
* ``crash_at_step``: while running that step, print a segfault block and exit 139.
* ``hang_at_step``: stop printing while running that step and sleep forever.
* ``traceback_after_last``: after the final step line, print a Python traceback and exit 1
  (``traceback_message`` sets its last line).
* ``slow_factor``: multiplies the step time and divides TFLOP/s/device and Tokens/s/device.
* ``exit_code``: exit status after a complete run (default 0).
* A file ``finish`` appearing in ``$CVS_STAND_IN_DIR`` makes the remaining steps take no time: a test that
  needs a long run only until it has checked something ends it early, with every step and the exit as configured.
* ``step_seconds`` (0.05), ``compile_seconds`` (0.2, added to step 0), ``tflops`` (150.0) and
  ``tokens_per_second`` (9000.0) set the nominal speed; ``devices_per_node`` (8, or the
  count in HIP_VISIBLE_DEVICES) the device count; ``seed`` (0) the jitter.

The JAX distributed settings (``JAX_COORDINATOR_ADDRESS``/``JAX_PROCESS_ID``/
``JAX_NUM_PROCESSES``, MaxText's ``JAX_COORDINATOR_IP``/``JAX_COORDINATOR_PORT``/
``NNODES``/``NODE_RANK``, or ``--coordinator_address=``/``--process_id=``/
``--num_processes=`` flags) are echoed in a startup line.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import threading
import time
from typing import Any, Dict, List, NoReturn, Optional, Tuple

FAULT_FILE = "maxtext.json"
DEFAULT_FAULT_DIR = "/root/.cvs-stand-in"
DEFAULT_STEPS = 10
DEFAULT_TRACEBACK_MESSAGE = "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Shutdown barrier has failed."
FAULT_KEYS = {
    "nan_at_step",
    "nan_value",
    "crash_at_step",
    "hang_at_step",
    "traceback_after_last",
    "traceback_message",
    "slow_factor",
    "exit_code",
    "step_seconds",
    "compile_seconds",
    "tflops",
    "tokens_per_second",
    "devices_per_node",
    "seed",
}
HERE = os.path.abspath(__file__)
SITE = "/usr/local/lib/python3.10/dist-packages"


def out(message: str, level: str = "I", source: str = "train.py", lineno: int = 0) -> None:
    """Print one absl-style line to stdout and flush it."""
    now = time.time()
    stamp = time.localtime(now)
    prefix = (
        f"{level}{stamp.tm_mon:02d}{stamp.tm_mday:02d} {stamp.tm_hour:02d}:{stamp.tm_min:02d}:"
        f"{stamp.tm_sec:02d}.{int((now % 1) * 1e6):06d} {threading.get_ident() % 1000000:6d} {source}:{lineno}] "
    )
    sys.stdout.write(prefix + message + "\n")
    sys.stdout.flush()


def err(text: str) -> None:
    """Print raw lines to stderr and flush them."""
    sys.stdout.flush()
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def die(message: str, code: int = 2) -> NoReturn:
    err(f"train.py (stand-in): {message}")
    sys.exit(code)


def parse_argv(argv: List[str]) -> Tuple[Optional[str], Dict[str, str], Dict[str, str]]:
    """Return (config path, key=value overrides, --flag=value flags)."""
    config = None
    overrides: Dict[str, str] = {}
    flags: Dict[str, str] = {}
    for arg in argv:
        if arg.startswith("--"):
            key, _, value = arg[2:].partition("=")
            flags[key] = value
        elif "=" in arg:
            key, _, value = arg.partition("=")
            overrides[key.strip()] = value.strip()
        elif config is None:
            config = arg
        else:
            die(f"unexpected argument {arg!r} (expected key=value)", 1)
    return config, overrides, flags


def read_config(path: Optional[str]) -> Dict[str, str]:
    """Top-level ``key: value`` lines of a YAML config (no nesting, no PyYAML)."""
    values: Dict[str, str] = {}
    if path is None:
        return values
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip() or line[0] in " \t#-":
                    continue
                key, sep, value = line.partition(":")
                if not sep:
                    continue
                value = value.split(" #", 1)[0].strip().strip("'\"")
                values[key.strip()] = value
    except OSError as exc:
        out(f"Config file {path} could not be read ({exc.strerror}); using built-in defaults", level="W", lineno=372)
    return values


def load_faults() -> Dict[str, Any]:
    path = os.path.join(os.environ.get("CVS_STAND_IN_DIR", DEFAULT_FAULT_DIR), FAULT_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        die(f"cannot read fault file {path}: {exc}")
    if not text.strip():
        return {}
    try:
        faults = json.loads(text)
    except ValueError as exc:
        die(f"fault file {path} is not valid JSON: {exc}")
    if not isinstance(faults, dict):
        die(f"fault file {path} must hold a JSON object, got {type(faults).__name__}")
    unknown = sorted(set(faults) - FAULT_KEYS)
    if unknown:
        die(f"fault file {path} has unknown keys {unknown}; known: {sorted(FAULT_KEYS)}")
    return faults


def number(faults: Dict[str, Any], key: str, default: float, minimum: float = 0.0) -> float:
    value = faults.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        die(f"fault {key!r} must be a number >= {minimum}, got {value!r}")
    return float(value)


def step_option(faults: Dict[str, Any], key: str) -> Optional[int]:
    value = faults.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        die(f"fault {key!r} must be a step number >= 0, got {value!r}")
    return value


def distributed(flags: Dict[str, str], overrides: Dict[str, str]) -> Tuple[str, int, int, str]:
    """(coordinator address, number of processes, process id, where they came from)."""
    env = os.environ
    source = "defaults"
    coordinator = flags.get("coordinator_address") or overrides.get("jax_coordinator_address") or ""
    if coordinator:
        source = "flags"
    elif env.get("JAX_COORDINATOR_ADDRESS"):
        coordinator, source = env["JAX_COORDINATOR_ADDRESS"], "env"
    elif env.get("JAX_COORDINATOR_IP"):
        coordinator, source = f"{env['JAX_COORDINATOR_IP']}:{env.get('JAX_COORDINATOR_PORT', '')}", "env"
    raw_count = flags.get("num_processes") or env.get("JAX_NUM_PROCESSES") or env.get("NNODES") or "1"
    raw_id = flags.get("process_id") or env.get("JAX_PROCESS_ID") or env.get("NODE_RANK") or "0"
    # Only echoed: a real launch with inconsistent values fails inside JAX, not here.
    count = int(raw_count) if raw_count.isdigit() and int(raw_count) > 0 else 1
    index = int(raw_id) if raw_id.isdigit() else 0
    if (str(count), str(index)) != (raw_count, raw_id):
        out(f"Unusable JAX process settings num_processes={raw_count!r} process_id={raw_id!r}", level="W")
    return coordinator or "none", count, index, source


def hang() -> NoReturn:
    while True:
        time.sleep(3600)


def crash(step: int) -> NoReturn:
    thread = threading.get_ident()
    err(
        f"*** SIGSEGV received at time={int(time.time())} on cpu 3 ***\n"
        "PC: @     0x7f3c8e4a1b2c  (unknown)  hipMemcpyWithStream\n"
        "Fatal Python error: Segmentation fault\n"
        "\n"
        f"Current thread 0x{thread:016x} (most recent call first):\n"
        f'  File "{SITE}/jax/_src/interpreters/pxla.py", line 1297 in __call__\n'
        f'  File "{SITE}/jax/_src/pjit.py", line 1729 in _pjit_call_impl_python\n'
        f'  File "{HERE}", line 412 in train_loop\n'
        f'  File "{HERE}", line 498 in main\n'
        f'  File "{SITE}/absl/app.py", line 254 in _run_main\n'
        f'  File "{SITE}/absl/app.py", line 308 in run\n'
        f'  File "{HERE}", line 502 in <module>\n'
        "\n"
        "Extension modules: numpy.core._multiarray_umath, numpy.core._multiarray_tests, jaxlib.cpu_feature_guard"
        " (total: 3)\n"
        f"(stand-in: injected crash while running step {step})"
    )
    sys.exit(139)


def final_traceback(message: str) -> NoReturn:
    err(
        "Traceback (most recent call last):\n"
        f'  File "{HERE}", line 502, in <module>\n'
        "    app.run(main)\n"
        f'  File "{SITE}/absl/app.py", line 308, in run\n'
        "    _run_main(main, args)\n"
        f'  File "{SITE}/absl/app.py", line 254, in _run_main\n'
        "    sys.exit(main(argv))\n"
        f'  File "{HERE}", line 498, in main\n'
        "    run(config, recorder, diagnostic_config)\n"
        f'  File "{HERE}", line 471, in run\n'
        "    train_loop(config, recorder)\n"
        f'  File "{HERE}", line 445, in train_loop\n'
        "    jax.distributed.shutdown()\n"
        f"{message}"
    )
    sys.exit(1)


def main(argv: List[str]) -> int:
    config_path, overrides, flags = parse_argv(argv)
    faults = load_faults()
    config = read_config(config_path)

    def setting(key: str, default: str) -> str:
        return overrides.get(key, config.get(key, default))

    try:
        steps = int(setting("steps", str(DEFAULT_STEPS)).replace("_", ""))
        batch = float(setting("per_device_batch_size", "12.0"))
        seq_len = int(setting("max_target_length", "2048"))
        mtp_layers = int(setting("mtp_num_layers", "0"))
        eval_interval = int(setting("eval_interval", "-1"))
    except ValueError as exc:
        err(f'Traceback (most recent call last):\n  File "{HERE}", line 498, in main\nValueError: {exc}')
        return 1

    step_seconds = number(faults, "step_seconds", 0.05, minimum=1e-4)
    compile_seconds = number(faults, "compile_seconds", 0.2)
    slow = number(faults, "slow_factor", 1.0, minimum=1e-6)
    base_tflops = number(faults, "tflops", 150.0)
    base_tokens = number(faults, "tokens_per_second", 9000.0)
    seed = int(number(faults, "seed", 0))
    nan_at = step_option(faults, "nan_at_step")
    crash_at = step_option(faults, "crash_at_step")
    hang_at = step_option(faults, "hang_at_step")
    nan_value = str(faults.get("nan_value", "nan"))
    if nan_value not in ("nan", "inf", "-inf"):
        die(f"fault 'nan_value' must be nan, inf or -inf, got {nan_value!r}")
    exit_code = int(number(faults, "exit_code", 0))

    visible = os.environ.get("HIP_VISIBLE_DEVICES") or os.environ.get("ROCR_VISIBLE_DEVICES") or ""
    default_devices = len([d for d in visible.split(",") if d.strip()]) or 8
    per_node = int(number(faults, "devices_per_node", default_devices, minimum=1))
    coordinator, num_processes, process_id, source = distributed(flags, overrides)
    total_devices = per_node * num_processes

    out("System Information: Jax Version: 0.4.35", source="max_utils.py", lineno=611)
    out("System Information: Jaxlib Version: 0.4.35", source="max_utils.py", lineno=612)
    out("System Information: Jax Backend: PJRT C API", source="max_utils.py", lineno=613)
    if overrides:
        out(f"Updating keys from env and command line: {sorted(overrides)}", source="pyconfig.py", lineno=402)
    for key in ("run_name", "base_output_directory", "model_name", "steps", "per_device_batch_size"):
        default = {"steps": str(DEFAULT_STEPS), "per_device_batch_size": "12.0", "model_name": "default"}.get(key, "")
        out(f"Config param {key}: {setting(key, default)}", source="pyconfig.py", lineno=655)
    if num_processes > 1 or coordinator != "none":
        out("Attempting to initialize the jax distributed system for GPU backend...", source="max_utils.py", lineno=228)
    out(
        f"Jax distributed system: coordinator_address={coordinator} num_processes={num_processes} "
        f"process_id={process_id} (from {source})",
        source="max_utils.py",
        lineno=241,
    )
    local = ", ".join(f"RocmDevice(id={process_id * per_node + k})" for k in range(per_node))
    out(f"jax.local_devices(): [{local}]", source="train.py", lineno=388)
    shape = ", ".join(["1", "1", str(total_devices)] + ["1"] * 9)
    out(f"Num_devices: {total_devices}, shape ({shape})", source="max_utils.py", lineno=663)
    out("number parameters: 1.104 billion", source="max_utils.py", lineno=702)
    out(f"Per train step:\n Total TFLOPs: {base_tflops * step_seconds:.2f}", source="maxtext_utils.py", lineno=201)

    tflop_per_step = base_tflops * step_seconds
    tokens_per_step = base_tokens * step_seconds
    total_weights = int(batch * seq_len * total_devices)
    tau = max(3.0, steps / 3.0)

    def loss_at(step: int) -> float:
        return 1.8 + (10.9 - 1.8) * math.exp(-step / tau)

    def fmt(value: float) -> str:
        return nan_value if not math.isfinite(value) else f"{value:.3f}"

    finish_file = os.path.join(os.environ.get("CVS_STAND_IN_DIR", DEFAULT_FAULT_DIR), "finish")
    pending: Optional[str] = None
    for step in range(steps):
        # The previous step's metrics are written once this step is dispatched.
        if pending is not None:
            out(pending, source="metric_logger.py", lineno=180)
            pending = None
        if hang_at is not None and step == hang_at:
            hang()
        if crash_at is not None and step == crash_at:
            crash(step)
        jitter = 1.0 + random.Random(seed * 100003 + step).uniform(-0.01, 0.01)
        seconds = (step_seconds * slow + (compile_seconds if step == 0 else 0.0)) * jitter
        if os.path.exists(finish_file):
            seconds = step_seconds * 0.01
        time.sleep(seconds)
        loss = float(nan_value) if nan_at is not None and step >= nan_at else loss_at(step)
        fields = [
            f"completed step: {step}",
            f"seconds: {seconds:.3f}",
            f"TFLOP/s/device: {tflop_per_step / seconds:.3f}",
            f"Tokens/s/device: {tokens_per_step / seconds:.3f}",
            f"total_weights: {total_weights}",
            f"loss: {fmt(loss)}",
        ]
        if mtp_layers > 0:
            mtp = loss * 0.1
            fields += [f"main_model_loss: {fmt(loss - mtp)}", f"mtp_loss: {fmt(mtp)}"]
        pending = ", ".join(fields)
        if eval_interval > 0 and (step + 1) % eval_interval == 0:
            out(pending, source="metric_logger.py", lineno=180)
            pending = None
            eval_loss = loss + 0.05
            out(
                f"eval metrics after step: {step}, loss={fmt(eval_loss)}, total_weights={total_weights // 4}",
                source="metric_logger.py",
                lineno=203,
            )

    # Shutdown: the last step's metrics are flushed when the logger is closed.
    if pending is not None:
        out(pending, source="metric_logger.py", lineno=180)
    if faults.get("traceback_after_last"):
        final_traceback(str(faults.get("traceback_message") or DEFAULT_TRACEBACK_MESSAGE))
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
