"""Unit tests for plugin_utils/_maxtext/metrics.py, the maxtext_metrics filter and the MaxText stand-in."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.maxtext_metrics import FilterModule
from ansible_collections.cvs.cluster.plugins.filter.maxtext_metrics import maxtext_metrics as maxtext_filter
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_IGNORE_ERROR_PATTERNS,
    completion_marker,
    maxtext_metrics,
    parse_eval,
    parse_steps,
)

REPO = Path(__file__).resolve().parents[5]
STAND_IN = REPO / "tests/cluster/image/stand-ins/workspace/maxtext/MaxText/train.py"

PREFIX = "I1202 10:00:51.000000 139 metric_logger.py:180] "

# The 10-step MaxText run from the upstream "understand logs and metrics" guide, absl-prefixed.
GUIDE_ROWS = [
    "0, seconds: 44.923, TFLOP/s/device: 17.022, Tokens/s/device: 1094.129, total_weights: 196608, loss: 12.038",
    "1, seconds: 0.319, TFLOP/s/device: 2400.734, Tokens/s/device: 154316.608, total_weights: 196608, loss: 12.038",
    "2, seconds: 5.658, TFLOP/s/device: 135.158, Tokens/s/device: 8687.815, total_weights: 196608, loss: 11.689",
    "3, seconds: 5.402, TFLOP/s/device: 141.542, Tokens/s/device: 9098.189, total_weights: 196608, loss: 11.379",
    "4, seconds: 5.669, TFLOP/s/device: 134.884, Tokens/s/device: 8670.207, total_weights: 196608, loss: 11.110",
    "5, seconds: 5.668, TFLOP/s/device: 134.909, Tokens/s/device: 8671.794, total_weights: 196608, loss: 10.879",
    "6, seconds: 5.668, TFLOP/s/device: 134.914, Tokens/s/device: 8672.153, total_weights: 196608, loss: 10.688",
    "7, seconds: 5.669, TFLOP/s/device: 134.882, Tokens/s/device: 8670.101, total_weights: 196608, loss: 10.542",
    "8, seconds: 5.668, TFLOP/s/device: 134.911, Tokens/s/device: 8671.946, total_weights: 196608, loss: 10.440",
    "9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, total_weights: 196608, loss: 10.374",
]
GUIDE_LOG = "\n".join(
    [
        "I1202 10:00:01.000000 139 max_utils.py:611] System Information: Jax Version: 0.4.35",
        "I1202 10:00:01.000000 139 pyconfig.py:655] Config param steps: 10",
        "I1202 10:00:01.000000 139 pyconfig.py:655] Config param loss_fsdp_axes: fsdp",
        "I1202 10:00:02.000000 139 max_utils.py:663] Num_devices: 4, shape (1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
    ]
    + [
        f"I1202 10:00:{50 + i}.000000 139 metric_logger.py:180] completed step: {row}"
        for i, row in enumerate(GUIDE_ROWS)
    ]
)

# Multi-token prediction, NaN from step 3 on, eval lines, a traceback after the last step.
MTP_NAN_LOG = f"""\
{PREFIX}completed step: 0, seconds: 42.000, TFLOP/s/device: 10.000, Tokens/s/device: 500.000, total_weights: 8192, \
loss: 11.000, main_model_loss: 10.500, mtp_loss: 0.500
{PREFIX}completed step: 1, seconds: 2.000, TFLOP/s/device: 100.000, Tokens/s/device: 4000.000, total_weights: 8192, \
loss: 10.000, main_model_loss: 9.500, mtp_loss: 0.500
{PREFIX}completed step: 2, seconds: 4.000, TFLOP/s/device: 50.000, Tokens/s/device: 2000.000, total_weights: 8192, \
loss: 9.000, main_model_loss: 8.600, mtp_loss: 0.400
I1202 10:01:10.000000 139 metric_logger.py:203] eval metrics after step: 2, loss=9.250, total_weights=2048, \
moe_lb_loss=0.010
{PREFIX}completed step: 3, seconds: 3.000, TFLOP/s/device: inf, Tokens/s/device: -inf, total_weights: 8192, \
loss: nan, main_model_loss: nan, mtp_loss: nan
{PREFIX}completed step: 4, seconds: 6.000, TFLOP/s/device: 70.000, Tokens/s/device: NaN, total_weights: 8192, \
loss: -inf, main_model_loss: 1.000, mtp_loss: 0.100
eval metrics after step: 4, loss=nan, total_weights=2048
Traceback (most recent call last):
  File "/workspace/maxtext/MaxText/train.py", line 502, in <module>
    app.run(main)
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Shutdown barrier has failed.
"""


def first_error(line: str, patterns: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Name of the first pattern (in order) that matches ``line``, as log_poll scans."""
    for name, regex in (patterns or DEFAULT_ERROR_PATTERNS).items():
        if re.search(regex, line):
            return name
    return None


# ----------------------------------------------------------------------------- parse_steps


def test_parse_steps_absl_prefixed_guide_log() -> None:
    steps = parse_steps(GUIDE_LOG)
    assert [s["step"] for s in steps] == list(range(10))
    assert steps[0] == {
        "step": 0,
        "seconds": 44.923,
        "tflops_per_device": 17.022,
        "tokens_per_device": 1094.129,
        "total_weights": 196608,
        "loss": 12.038,
        "extra": {},
        "lineno": 5,
    }
    assert steps[-1]["loss"] == 10.374
    assert isinstance(steps[-1]["total_weights"], int)
    assert steps[-1]["lineno"] == 14


def test_parse_steps_mtp_fields_and_non_finite_values() -> None:
    steps = parse_steps(MTP_NAN_LOG)
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
    assert steps[1]["extra"] == {"main_model_loss": 9.5, "mtp_loss": 0.5}
    assert steps[1]["loss"] == 10.0
    assert math.isnan(steps[3]["loss"])
    assert math.isnan(steps[3]["extra"]["mtp_loss"])
    assert steps[3]["tflops_per_device"] == math.inf
    assert steps[3]["tokens_per_device"] == -math.inf
    assert steps[3]["seconds"] == 3.0
    assert steps[4]["loss"] == -math.inf
    assert math.isnan(steps[4]["tokens_per_device"])
    assert all(isinstance(s["loss"], float) for s in steps)


def test_parse_steps_ignores_eval_traceback_and_config_lines() -> None:
    text = "\n".join(
        [
            "Config param steps: 5",
            "Saved a checkpoint at step 5.",
            "eval metrics after step: 4, loss=2.0, total_weights=10",
            "completed step: x, seconds: 1.0",
            "completed step: 7, nothing useful here",
            f"{PREFIX}completed step: 4, seconds: 1.500, TFLOP/s/device: 99.500, Tokens/s/device: 1000.000, "
            "total_weights: 4096, loss: 2.500",
        ]
    )
    steps = parse_steps(text)
    assert len(steps) == 1
    assert steps[0]["step"] == 4
    assert steps[0]["lineno"] == 6


def test_parse_steps_older_format_without_total_weights() -> None:
    steps = parse_steps(
        "completed step: 3, seconds: 1.250, TFLOP/s/device: 80.000, Tokens/s/device: 900.000, loss: 7.5"
    )
    assert steps == [
        {
            "step": 3,
            "seconds": 1.25,
            "tflops_per_device": 80.0,
            "tokens_per_device": 900.0,
            "total_weights": None,
            "loss": 7.5,
            "extra": {},
            "lineno": 1,
        }
    ]


def test_parse_steps_accepts_bytes_lines_and_crlf() -> None:
    line = "completed step: 1, seconds: 2.0, TFLOP/s/device: 3.0, Tokens/s/device: 4.0, total_weights: 5, loss: 6.0"
    assert parse_steps(line.encode() + b"\r\n")[0]["loss"] == 6.0
    assert [s["step"] for s in parse_steps(["noise", line, line.replace("step: 1", "step: 2")])] == [1, 2]
    assert parse_steps("") == []
    assert parse_steps(None) == []


def test_parse_eval() -> None:
    evals = parse_eval(MTP_NAN_LOG)
    assert len(evals) == 2
    assert evals[0] == {
        "step": 2,
        "loss": 9.25,
        "total_weights": 2048,
        "extra": {"moe_lb_loss": 0.01},
        "lineno": 4,
    }
    assert evals[1]["step"] == 4
    assert math.isnan(evals[1]["loss"])


# ----------------------------------------------------------------------------- maxtext_metrics


def test_metrics_guide_log_defaults() -> None:
    m = maxtext_metrics(GUIDE_LOG)
    assert m["steps"] == 10
    assert m["last_step"] == 9
    assert m["measured_steps"] == 9
    # window 10 over steps 1..9 (step 0 excluded); step 1's async-dispatch outlier is in.
    assert m["tflops_per_device"] == pytest.approx(387.4286666667)
    assert m["tokens_per_device"] == pytest.approx(24903.5078888889)
    assert m["step_time_mean"] == pytest.approx(45.388 / 9)
    assert m["step_time_p50"] == pytest.approx(5.668)
    assert m["step_time_p95"] == pytest.approx(5.669)
    assert m["final_loss"] == 10.374
    assert m["loss_decreased"] is True
    assert m["nan_steps"] == []
    assert m["eval_steps"] == 0
    assert m["final_eval_loss"] is None


def test_metrics_window_and_warmup() -> None:
    m = maxtext_metrics(GUIDE_LOG, window=5)
    assert m["tflops_per_device"] == pytest.approx(134.908)
    assert m["tokens_per_device"] == pytest.approx(8671.7504)
    m = maxtext_metrics(GUIDE_LOG, warmup_steps=2)
    assert m["measured_steps"] == 8
    assert m["tflops_per_device"] == pytest.approx(135.7655)
    assert m["step_time_mean"] == pytest.approx(5.633625)


def test_metrics_step0_compile_time_excluded_unless_warmup_zero() -> None:
    with_warmup = maxtext_metrics(GUIDE_LOG)
    assert with_warmup["step_time_mean"] < 6.0
    no_warmup = maxtext_metrics(GUIDE_LOG, warmup_steps=0, window=None)
    assert no_warmup["measured_steps"] == 10
    assert no_warmup["step_time_mean"] == pytest.approx(9.0311)
    assert no_warmup["step_time_p95"] == pytest.approx(27.2587)
    assert no_warmup["tflops_per_device"] == pytest.approx(350.388)


def test_metrics_nan_inf_and_traceback_after_last_step() -> None:
    m = maxtext_metrics(MTP_NAN_LOG)
    assert m["steps"] == 5
    assert m["last_step"] == 4
    assert m["nan_steps"] == [3, 4]
    assert m["loss_decreased"] is False
    assert m["final_loss"] == -math.inf
    # Non-finite values never enter a mean: tflops of steps 1, 2, 4; tokens of steps 1, 2.
    assert m["tflops_per_device"] == pytest.approx((100.0 + 50.0 + 70.0) / 3)
    assert m["tokens_per_device"] == pytest.approx(3000.0)
    assert m["step_time_mean"] == pytest.approx((2.0 + 4.0 + 3.0 + 6.0) / 4)
    assert m["step_time_p50"] == pytest.approx(3.5)
    assert m["step_time_p95"] == pytest.approx(5.7)
    assert m["eval_steps"] == 2
    assert math.isnan(m["final_eval_loss"])


def test_metrics_nan_final_loss_is_nan() -> None:
    text = "\n".join(
        f"{PREFIX}completed step: {i}, seconds: 1.0, TFLOP/s/device: 10.0, Tokens/s/device: 20.0, "
        f"total_weights: 1, loss: {loss}"
        for i, loss in enumerate(["5.0", "4.0", "3.0", "nan"])
    )
    m = maxtext_metrics(text)
    assert math.isnan(m["final_loss"])
    assert m["nan_steps"] == [3]
    assert m["loss_decreased"] is False
    assert m["tflops_per_device"] == 10.0


def test_metrics_nan_in_warmup_step_still_reported() -> None:
    text = (
        "completed step: 0, seconds: 30.0, TFLOP/s/device: 1.0, Tokens/s/device: 2.0, total_weights: 1, loss: nan\n"
        "completed step: 1, seconds: 1.0, TFLOP/s/device: 9.0, Tokens/s/device: 8.0, total_weights: 1, loss: 4.0\n"
        "completed step: 2, seconds: 1.0, TFLOP/s/device: 9.0, Tokens/s/device: 8.0, total_weights: 1, loss: 3.0\n"
    )
    m = maxtext_metrics(text)
    assert m["nan_steps"] == [0]
    assert m["loss_decreased"] is False
    assert m["final_loss"] == 3.0


def test_metrics_loss_not_decreasing() -> None:
    text = "\n".join(
        f"completed step: {i}, seconds: 1.0, TFLOP/s/device: 10.0, Tokens/s/device: 20.0, total_weights: 1, loss: {x}"
        for i, x in enumerate([9.0, 5.0, 6.0, 5.0])
    )
    assert maxtext_metrics(text)["loss_decreased"] is False  # 5.0 is not < 5.0
    assert maxtext_metrics(text, warmup_steps=2)["loss_decreased"] is True  # 5.0 < 6.0


def test_metrics_no_data() -> None:
    m = maxtext_metrics("I1202 10:00:01.000000 139 train.py:1] starting\nTraceback (most recent call last):\n")
    assert m == {
        "steps": 0,
        "last_step": None,
        "tflops_per_device": None,
        "tokens_per_device": None,
        "step_time_mean": None,
        "step_time_p50": None,
        "step_time_p95": None,
        "final_loss": None,
        "loss_decreased": None,
        "nan_steps": [],
        "measured_steps": 0,
        "eval_steps": 0,
        "final_eval_loss": None,
    }


def test_metrics_only_warmup_step() -> None:
    m = maxtext_metrics(f"{PREFIX}completed step: 0, {GUIDE_ROWS[0].split(', ', 1)[1]}")
    assert m["steps"] == 1
    assert m["last_step"] == 0
    assert m["final_loss"] == 12.038
    assert m["tflops_per_device"] is None
    assert m["step_time_mean"] is None
    assert m["loss_decreased"] is None


def test_metrics_single_measured_step() -> None:
    m = maxtext_metrics("\n".join(f"completed step: {row}" for row in GUIDE_ROWS[:2]))
    assert m["measured_steps"] == 1
    assert m["step_time_p50"] == 0.319
    assert m["step_time_p95"] == 0.319
    assert m["loss_decreased"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup_steps": -1}, "warmup_steps must be an integer >= 0"),
        ({"warmup_steps": "x"}, "warmup_steps must be an integer >= 0"),
        ({"warmup_steps": True}, "warmup_steps must be an integer >= 0"),
        ({"window": 0}, "window must be an integer >= 1"),
        ({"window": 2.5}, "window must be an integer >= 1"),
    ],
)
def test_metrics_invalid_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        maxtext_metrics(GUIDE_LOG, **kwargs)


def test_metrics_numeric_string_arguments() -> None:
    assert maxtext_metrics(GUIDE_LOG, warmup_steps="2", window="5")["tflops_per_device"] == pytest.approx(134.908)


# ----------------------------------------------------------------------------- completion_marker


def test_completion_marker() -> None:
    marker = completion_marker(10)
    assert marker == r"completed step:\s*9,"
    assert re.search(marker, f"{PREFIX}completed step: {GUIDE_ROWS[9]}")
    assert not re.search(marker, f"{PREFIX}completed step: {GUIDE_ROWS[8]}")
    assert not re.search(completion_marker(20), "completed step: 119, seconds: 1.0")
    assert not re.search(completion_marker(20), "completed step: 190, seconds: 1.0")
    assert re.search(completion_marker(20), "completed step: 19, seconds: 1.0")
    assert completion_marker(1) == r"completed step:\s*0,"


@pytest.mark.parametrize("bad", [0, -3, True, "abc", None, 2.5])
def test_completion_marker_rejects_bad_steps(bad: object) -> None:
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        completion_marker(bad)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- error patterns

# Lines real MaxText 0.2.5 (JAX 0.12 on CPU, 3 processes) printed in tests/integration/test_maxtext_real.py.
REAL_NAN_ABORT = "I1207 02:41:07.310221 139838290515840 metric_logger.py:349] Aborting training due to NaN loss."
REAL_PEER_LOST = (
    "jax.errors.JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
    "Read error [10.77.0.12]:46015: Connection reset by peer"
)
REAL_NEVER_JOINED = (
    "F1207 01:41:18.160779   17074 client.h:86] Terminating process because the JAX distributed service detected "
    "fatal errors. This most likely indicates that another task died; see the other task logs for more details. "
    "Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: "
    "DEADLINE_EXCEEDED: Deadline Exceeded"
)
REAL_UNKNOWN_KEY = "ValueError: 'no_such_key' not in 'emb_dim', 'mlp_dim', 'num_decoder_layers', 'run_name'"
REAL_STUB = "[NO-OP] mldiagnostics: dependency missing; using stub. (ModuleNotFoundError)"
REAL_STEP = (
    "I1207 01:40:48.082708 140388093601664 metric_logger.py:265] completed step: 19, seconds: 0.070, "
    "TFLOP/s/device: 0.001, Tokens/s/device: 919.752, total_weights: 192, loss: 5.993, lm_loss: 5.993, "
    "perplexity: 400.717"
)

ERROR_LINES = [
    (REAL_NAN_ABORT, "nan_loss_abort"),
    (REAL_PEER_LOST, "collective_peer_lost"),
    (REAL_NEVER_JOINED, "jax_coordination"),
    (REAL_UNKNOWN_KEY, "unknown_config_key"),
    # NaN / Inf in metrics
    (
        f"{PREFIX}completed step: 5, seconds: 5.6, TFLOP/s/device: 134.9, Tokens/s/device: 8672.7, "
        "total_weights: 196608, loss: nan",
        "nan_or_inf",
    ),
    (
        "completed step: 5, seconds: 5.6, TFLOP/s/device: 134.9, Tokens/s/device: 8672.7, total_weights: 1, loss: -inf",
        "nan_or_inf",
    ),
    (
        "completed step: 5, seconds: 0.0, TFLOP/s/device: inf, Tokens/s/device: 1.0, total_weights: 1, loss: 2.0",
        "nan_or_inf",
    ),
    (
        "completed step: 5, seconds: 1.0, TFLOP/s/device: 1.0, Tokens/s/device: NaN, total_weights: 1, loss: 2.0",
        "nan_or_inf",
    ),
    (
        "completed step: 5, seconds: 1.0, TFLOP/s/device: 1.0, Tokens/s/device: 1.0, total_weights: 1, loss: 2.0, "
        "main_model_loss: 1.9, mtp_loss: nan",
        "nan_or_inf",
    ),
    ("eval metrics after step: 9, loss=nan, total_weights=1000", "nan_or_inf"),
    ("FloatingPointError: invalid value (nan) encountered in jit(train_step)", "nan_or_inf"),
    # memory
    (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2GiB.",
        "out_of_memory",
    ),
    (
        "E1202 10:00:51.000000 139 bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2G",
        "out_of_memory",
    ),
    ("Failed to allocate request for 1.50GiB (1610612736B) on device ordinal 0", "out_of_memory"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", "out_of_memory"),
    ("  what():  std::bad_alloc", "out_of_memory"),
    # JAX coordination
    (
        "Terminating process because the coordinator detected missing heartbeats. This most likely indicates that "
        "another task died",
        "jax_heartbeat",
    ),
    (
        "Task /job:jax_worker/replica:0/task:37 heartbeat timeout. This indicates that the remote task has failed",
        "jax_heartbeat",
    ),
    (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect",
        "jax_coordination",
    ),
    ("E1202 10:00:51.000000 139 client.cc:105] Shutdown barrier has failed.", "jax_coordination"),
    ("CoordinationServiceError: task is not connected", "jax_coordination"),
    ("tensorflow.BarrierError: barrier failed", "jax_coordination"),
    # RCCL / NCCL
    ("n1:1234:1234 [0] NCCL WARN Call to connect returned Connection refused", "rccl_error"),
    ("n1:1234:1234 [0] NCCL ERROR internal error", "rccl_error"),
    ("NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error", "rccl_error"),
    ("RCCL operation rcclCommInitRank(comm) failed: internal error", "rccl_error"),
    ("NCCL timeout while waiting for peer", "rccl_timeout"),
    ("RCCL timeout in all-reduce", "rccl_timeout"),
    ("mlx5: n1: got completion with error: local work queue catastrophic error", "rccl_error"),
    (
        "XlaRuntimeError: INTERNAL: ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
        "rccl_error",
    ),
    # GPU
    ("HW Exception by GPU node-2 (Agent handle: 0x55d1) reason :GPU Hang", "gpu_fault"),
    ("amdgpu 0000:05:00.0: GPU Reset in progress", "gpu_fault"),
    ("Uncorrectable error detected in UMC block", "gpu_fault"),
    ("Memory access fault by GPU node-4 (Agent handle: 0x2a1) on address 0x7f. Reason: Page not present", "gpu_fault"),
    # No GPU
    ("jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: No visible GPU devices.", "no_gpu"),
    ("E1202 10:00:51.000000 139 rocm_driver.cc:300] failed call to hipInit: HIP_ERROR_NoDevice", "no_gpu"),
    (
        "I1202 10:00:51.000000 139 rocm_diagnostics.cc:100] librocm reported version is: NOT_FOUND: was unable to find",
        "no_gpu",
    ),
    ("Unable to initialize backend 'rocm': INTERNAL: no supported devices found for platform ROCM", "no_gpu"),
    # Slurm ended the step: a -K1 kill as the simulated Slurm 22.05 prints it, and Slurm's time-limit form
    ("slurmstepd-node1: error: *** STEP 3.0 ON node1 CANCELLED AT 2026-12-07T05:00:34 ***", "slurm_step_cancelled"),
    ("slurmstepd: error: *** JOB 7 ON n2 CANCELLED AT 2026-12-07T06:00 DUE TO TIME LIMIT ***", "slurm_step_cancelled"),
    # XLA runtime (generic)
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable", "xla_runtime_error"),
    # crashes
    ("Fatal Python error: Segmentation fault", "crash"),
    ("*** SIGSEGV received at time=1733133651 on cpu 12 ***", "crash"),
    ("/bin/bash: line 1:  4242 Segmentation fault      (core dumped) python3 MaxText/train.py", "crash"),
    ("Aborted (core dumped)", "crash"),
    ("F1202 10:00:51.000000 139 gpu_executable.cc:99] Check failed: ok", "crash"),
    # Python
    ("Fatal Python error: Aborted", "python_fatal"),
    ("Traceback (most recent call last):", "python_exception"),
    ("ModuleNotFoundError: No module named 'MaxText'", "python_exception"),
]


@pytest.mark.parametrize(("line", "name"), ERROR_LINES)
def test_error_patterns_name_real_failure_strings(line: str, name: str) -> None:
    assert first_error(line) == name


def test_error_patterns_cover_every_name() -> None:
    assert {name for _, name in ERROR_LINES} == set(DEFAULT_ERROR_PATTERNS)
    assert next(iter(DEFAULT_ERROR_PATTERNS)) == "nan_loss_abort"


def test_error_patterns_are_case_insensitive_without_flags() -> None:
    assert first_error("xlaruntimeerror: resource_exhausted: OUT OF MEMORY") == "out_of_memory"
    assert first_error("FATAL PYTHON ERROR: segmentation FAULT") == "crash"
    assert first_error("completed step: 1, LOSS: NAN") == "nan_or_inf"
    assert first_error("nccl warn something") == "rccl_error"


def test_error_patterns_join_into_one_alternation() -> None:
    # Scoped (?i:...) flags keep every pattern valid inside a larger regex.
    combined = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in DEFAULT_ERROR_PATTERNS.items()))
    match = combined.search("E1202 10:00:51.000000 139 client.cc:105] Shutdown barrier has failed.")
    assert match is not None
    assert match.lastgroup == "jax_coordination"
    assert combined.search("completed step: 1, seconds: 1.0, loss: 2.0") is None


HEALTHY_LINES = [
    *(f"{PREFIX}completed step: {row}" for row in GUIDE_ROWS),
    f"{PREFIX}completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, "
    "total_weights: 196608, loss: 10.374, main_model_loss: 10.1, mtp_loss: 0.274",
    "I1202 10:00:51.000000 139 metric_logger.py:203] eval metrics after step: 9, loss=10.412, total_weights=49152",
    "I1202 10:00:01.000000 139 pyconfig.py:655] Config param steps: 150001",
    "I1202 10:00:01.000000 139 pyconfig.py:655] Config param jax_distributed_initialization_timeout: 300",
    "I1202 10:00:01.000000 139 pyconfig.py:655] Config param z_loss_multiplier: 0.0",
    "I1202 10:00:01.000000 139 pyconfig.py:655] Config param infinity_norm: false",
    "I1202 10:00:01.000000 139 max_utils.py:611] System Information: Jax Backend: PJRT C API",
    "I1202 10:00:02.000000 139 max_utils.py:663] Num_devices: 16, shape (1, 1, 16, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
    "I1202 10:00:02.000000 139 max_utils.py:702] number parameters: 6.738 billion",
    "Total memory size: 100.4 GB, Output size: 44.5 GB, Temp size: 55.9 GB, Argument size: 44.5 GB",
    "Memstats: After params initialized:",
    "\tUsing (GB) 44.63 / 191.5 (23.3%) on rocm:0",
    "n1:1234:1234 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 23.",
    "n1:1234:1234 [0] NCCL INFO RCCL version 2.20.5+hip6.2 HEAD:3d9bbc1",
    "n1:1234:1234 [0] NCCL INFO comm 0x5610 rank 0 nranks 16 cudaDev 0 busId 5000 commId 0x12 - Init COMPLETE",
    "I1202 10:05:00.000000 139 checkpointing.py:400] Saved a checkpoint at step 100.",
    "I1202 10:05:00.000000 139 train.py:480] Reached the end of training; information summary follows",
    "Finished training; total loss reduction 1.664",
]


@pytest.mark.parametrize("line", HEALTHY_LINES)
def test_error_patterns_ignore_healthy_lines(line: str) -> None:
    assert first_error(line) is None


def test_real_maxtext_startup_stubs_are_ignored_and_its_step_line_parses() -> None:
    assert first_error(REAL_STUB) == "python_exception"
    assert first_error(REAL_STUB, DEFAULT_IGNORE_ERROR_PATTERNS) == "maxtext_optional_stub"
    assert first_error(REAL_STEP) is None
    (step,) = parse_steps(REAL_STEP)
    assert (step["step"], step["loss"], step["total_weights"]) == (19, 5.993, 192)
    assert step["extra"] == {"lm_loss": 5.993, "perplexity": 400.717}


def test_default_ignore_patterns_cover_benign_rccl_warnings() -> None:
    numa = (
        "n1:1234:1234 [0] NCCL WARN NUMA auto balancing enabled which can lead to variability in the RCCL performance"
    )
    iommu = 'n1:1234:1234 [0] NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity'
    for line in (numa, iommu):
        assert first_error(line) == "rccl_error"
        assert first_error(line, DEFAULT_IGNORE_ERROR_PATTERNS) is not None
    assert first_error("NCCL WARN Call to connect returned Connection refused", DEFAULT_IGNORE_ERROR_PATTERNS) is None


# ----------------------------------------------------------------------------- filter


def test_filter_registration_and_inputs() -> None:
    filters = FilterModule().filters()
    assert set(filters) == {"maxtext_metrics", "check_thresholds", "maxtext_first_failure", "maxtext_first_error"}
    assert filters["maxtext_metrics"](GUIDE_LOG, 1, 5)["tflops_per_device"] == pytest.approx(134.908)
    from_lines = maxtext_filter(GUIDE_LOG.splitlines(), window=5)
    assert from_lines == maxtext_metrics(GUIDE_LOG, window=5)
    assert maxtext_filter(GUIDE_LOG.encode())["steps"] == 10


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        ({"stdout": "x"}, {}, "expects the MaxText log as a string or a list of lines, got dict - pass the log"),
        (None, {}, "got None"),
        (42, {}, "got int"),
        (["ok", 3], {}, "must hold log lines"),
        ("text", {"window": 0}, "window must be an integer >= 1"),
    ],
)
def test_filter_errors(value: object, kwargs: dict, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        maxtext_filter(value, **kwargs)


# ----------------------------------------------------------------------------- stand-in trainer


def run_stand_in(
    tmp_path: Path, args: List[str], faults: Optional[dict] = None, env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess:
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir(exist_ok=True)
    base = {"step_seconds": 0.005, "compile_seconds": 0.02}
    base.update(faults or {})
    (fault_dir / "maxtext.json").write_text(json.dumps(base))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "NNODES", "NODE_RANK"))}
    full_env["CVS_STAND_IN_DIR"] = str(fault_dir)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, str(STAND_IN), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stand_in_is_executable_with_env_shebang() -> None:
    assert STAND_IN.read_text().startswith("#!/usr/bin/env python3\n")
    assert os.access(STAND_IN, os.X_OK)


def test_stand_in_healthy_run(tmp_path: Path) -> None:
    config = tmp_path / "base.yml"
    config.write_text("# test config\nrun_name: ''\nsteps: 7\nnested:\n  steps: 99\n")
    result = run_stand_in(tmp_path, [str(config), "run_name=t1", f"base_output_directory={tmp_path}"])
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    m = maxtext_metrics(result.stdout)
    assert m["steps"] == 7
    assert m["last_step"] == 6
    assert m["nan_steps"] == []
    assert m["loss_decreased"] is True
    assert m["tflops_per_device"] == pytest.approx(150.0, rel=0.02)
    assert m["tokens_per_device"] == pytest.approx(9000.0, rel=0.02)
    assert m["step_time_p50"] == pytest.approx(0.005, abs=0.0011)
    steps = parse_steps(result.stdout)
    assert steps[0]["seconds"] > 4 * steps[1]["seconds"]  # step 0 carries the compile time
    assert steps[0]["total_weights"] == 12 * 2048 * 8
    assert all(s["extra"] == {} for s in steps)
    lines = result.stdout.splitlines()
    assert re.search(completion_marker(7), lines[-1])
    assert all(
        re.match(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] ", line) for line in lines if line[:1] != " "
    )
    assert [line for line in lines if first_error(line)] == []
    assert "Config param run_name: t1" in result.stdout


def test_stand_in_argv_overrides_config_and_echoes_distributed_env(tmp_path: Path) -> None:
    config = tmp_path / "base.yml"
    config.write_text("steps: 50\n")
    env = {"JAX_COORDINATOR_ADDRESS": "10.77.0.11:12345", "JAX_NUM_PROCESSES": "3", "JAX_PROCESS_ID": "2"}
    result = run_stand_in(tmp_path, [str(config), "steps=3", "mtp_num_layers=1", "eval_interval=2"], env=env)
    assert result.returncode == 0, result.stderr
    assert "coordinator_address=10.77.0.11:12345 num_processes=3 process_id=2" in result.stdout
    assert "Num_devices: 24," in result.stdout
    m = maxtext_metrics(result.stdout)
    assert m["steps"] == 3
    assert m["eval_steps"] == 1
    assert set(parse_steps(result.stdout)[0]["extra"]) == {"main_model_loss", "mtp_loss"}


def test_stand_in_flags_for_distributed_settings(tmp_path: Path) -> None:
    result = run_stand_in(
        tmp_path,
        ["cfg.yml", "steps=2", "--coordinator_address=10.77.0.12:999", "--num_processes=2", "--process_id=1"],
    )
    assert result.returncode == 0, result.stderr
    assert "coordinator_address=10.77.0.12:999 num_processes=2 process_id=1 (from flags)" in result.stdout


def test_stand_in_nan_keeps_running(tmp_path: Path) -> None:
    result = run_stand_in(tmp_path, ["cfg.yml", "steps=8"], {"nan_at_step": 5})
    assert result.returncode == 0
    m = maxtext_metrics(result.stdout)
    assert m["steps"] == 8
    assert m["nan_steps"] == [5, 6, 7]
    assert m["loss_decreased"] is False
    nan_lines = [line for line in result.stdout.splitlines() if first_error(line)]
    assert len(nan_lines) == 3
    assert first_error(nan_lines[0]) == "nan_or_inf"
    assert "completed step: 5," in nan_lines[0]


def test_stand_in_crash(tmp_path: Path) -> None:
    result = run_stand_in(tmp_path, ["cfg.yml", "steps=20"], {"crash_at_step": 7})
    assert result.returncode == 139
    assert maxtext_metrics(result.stdout)["last_step"] == 6
    assert "Fatal Python error: Segmentation fault" in result.stderr
    assert first_error(result.stderr.splitlines()[0]) == "crash"


def test_stand_in_traceback_after_last_step(tmp_path: Path) -> None:
    result = run_stand_in(tmp_path, ["cfg.yml", "steps=4"], {"traceback_after_last": True})
    assert result.returncode == 1
    assert maxtext_metrics(result.stdout)["last_step"] == 3
    assert re.search(completion_marker(4), result.stdout.splitlines()[-1])
    errors = result.stderr.splitlines()
    assert errors[0] == "Traceback (most recent call last):"
    assert first_error(errors[0]) == "python_exception"


def test_stand_in_slow_factor_and_exit_code(tmp_path: Path) -> None:
    result = run_stand_in(tmp_path, ["cfg.yml", "steps=4"], {"slow_factor": 4.0, "exit_code": 3})
    assert result.returncode == 3
    m = maxtext_metrics(result.stdout)
    assert m["tflops_per_device"] == pytest.approx(150.0 / 4, rel=0.02)
    assert m["tokens_per_device"] == pytest.approx(9000.0 / 4, rel=0.02)
    assert m["step_time_mean"] == pytest.approx(0.02, abs=0.0011)


def test_stand_in_rejects_unknown_fault_keys(tmp_path: Path) -> None:
    result = run_stand_in(tmp_path, ["cfg.yml", "steps=2"], {"nan_step": 1})
    assert result.returncode == 2
    assert "unknown keys ['nan_step']" in result.stderr


def test_stand_in_hang(tmp_path: Path) -> None:
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    (fault_dir / "maxtext.json").write_text(json.dumps({"hang_at_step": 4, "step_seconds": 0.005}))
    env = dict(os.environ, CVS_STAND_IN_DIR=str(fault_dir))
    proc = subprocess.Popen(
        [sys.executable, str(STAND_IN), "cfg.yml", "steps=20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        seen: List[str] = []
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if "completed step: 3," in line:
                break
        time.sleep(0.5)
        assert proc.poll() is None  # still alive, printing nothing
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.communicate(timeout=10)[0]
    assert maxtext_metrics("".join(seen) + rest)["last_step"] == 3
