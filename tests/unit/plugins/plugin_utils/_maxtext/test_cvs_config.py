"""plugin_utils/_maxtext/cvs_config.py: upstream CVS JAX MaxText training configs (both layouts) mapped key by key.

The files are written for these tests after upstream's documented schemas (its README); none is copied."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_config import (
    MaxtextConfigError,
    is_upstream,
    map_config,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._run.extra_vars import extra_vars_files

FIXTURE = Path(__file__).resolve().parents[4] / "integration" / "fixtures" / "maxtext" / "cvs_train_params_config.json"

# the `training` layout: schema_version 1, sweeps as a list with enabled_sweep_list
TRAINING: dict[str, Any] = {
    "schema_version": 1,
    "framework": "jaxmaxtext",
    "gpu_arch": "mi300x",
    "enforce_thresholds": True,
    "threshold_json": "x_threshold.json",
    "paths": {"shared_fs": "/shared/{user-id}", "models_dir": "{shared_fs}/models"},
    "model": {"id": "llama", "remote": 0, "precision": "bf16"},
    "training": {
        "distributed": True,
        "gpus_per_node": 4,
        "steps": 30,
        "enable_checkpointing": False,
        "train_script": "/opt/maxtext/MaxText/train.py",
        "maxtext_config": {"model_name": "llama3.1-8b", "dtype": "bfloat16", "ici_fsdp_parallelism": 4},
        "tokenizer": {"hf_model_id": "x/y", "tokenizer_path": "{paths.models_dir}/tok"},
        "nic_type": "thor2",
        "env_vars": {"NCCL_IB_TC": "41"},
        "xla_flags": ["--xla_a=1", "--xla_b"],
        "nccl": {
            "ib_hca": ["rdma0", "rdma1"],
            "socket_ifname": "eno0",
            "gloo_socket_ifname": "eno1",
            "ib_gid_index": 3,
        },
        "jax_distributed": {"coordinator_ip": "10.0.0.5", "coordinator_port": 23456, "heartbeat_timeout": 900},
        "error_patterns": {"NCCL ERROR": "NCCL ERROR|NCCL timeout"},
        "sweeps": [
            {"name": "NNODES=2,PRECISION=BF16", "maxtext_overrides": {"per_device_batch_size": 2}},
            {"name": "NNODES=2,PRECISION=FP8", "maxtext_overrides": {"quantization": "nanoo_fp8", "steps": 40}},
        ],
        "enabled_sweep_list": ["NNODES=2,PRECISION=FP8"],
    },
    "maxtext_thresholds": {"NNODES=2,PRECISION=FP8": {"training.final_loss": {"kind": "max", "value": 15}}},
}


def upstream_file() -> dict[str, Any]:
    return {k: v for k, v in json.loads(FIXTURE.read_text()).items() if not k.startswith("_")}


def test_the_train_params_layout_is_honoured_key_by_key() -> None:
    mapped = map_config(upstream_file(), user="alice")
    s = mapped["settings"]
    assert s["maxtext_steps"] == 7 and s["maxtext_gpus_per_node"] == 2 and s["maxtext_model_name"] == "default"
    assert s["maxtext_tokenizer_path"] == "/home/alice/cache/maxtext/tokenizer"
    assert s["maxtext_xla_flags"] == [
        "--xla_gpu_enable_latency_hiding_scheduler=True",
        "--xla_gpu_enable_command_buffer=",
    ]
    assert s["maxtext_env"]["CVS_UPSTREAM_MARK"] == "from-container-env"
    assert s["maxtext_error_patterns_extra"] == {"batch of two": r"Config param per_device_batch_size: 2\b"}
    assert s["maxtext_config_overrides"] == {"per_device_batch_size": 3, "max_target_length": 128, "log_period": 100,
                                             "quantization": ""}  # fmt: skip
    assert s["maxtext_threshold_cell"] == "BS=3,PRECISION=BF16,SL=128"
    assert s["maxtext_sweep_name"] == "BS_3_PRECISION_BF16_SL_128"
    assert s["maxtext_thresholds"] == {}  # enforce_thresholds false: recorded, not judged
    ignored = " | ".join(mapped["ignored"])
    for key in ("gpu_name", "threshold_json", "paths.log_dir", "train_params.hf_model_id", "smoke: off"):
        assert key in ignored, key


def test_the_training_layout_is_honoured_key_by_key() -> None:
    s = map_config(TRAINING, user="bob")["settings"]
    assert s["maxtext_steps"] == 40  # the sweep's own steps win over training.steps
    assert s["maxtext_threshold_cell"] == "NNODES=2,PRECISION=FP8"
    assert s["maxtext_config_overrides"] == {
        "dtype": "bfloat16",
        "ici_fsdp_parallelism": 4,
        "quantization": "nanoo_fp8",
    }
    assert s["maxtext_train_scripts"] == ["/opt/maxtext/MaxText/train.py"]
    assert s["maxtext_tokenizer_path"] == "/shared/bob/models/tok"
    assert (s["maxtext_ib_hcas"], s["maxtext_network_interface"], s["maxtext_ib_gid_index"]) == (
        "rdma0,rdma1",
        "eno0",
        "3",
    )
    assert s["maxtext_coordinator_address"] == "10.0.0.5" and s["maxtext_coordinator_port"] == 23456
    assert s["maxtext_env"] == {"NCCL_IB_TC": "41", "GLOO_SOCKET_IFNAME": "eno1",
                                "JAX_DISTRIBUTED_HEARTBEAT_TIMEOUT_SECONDS": "900"}  # fmt: skip
    assert s["maxtext_xla_flags"] == ["--xla_a=1", "--xla_b"] and s["maxtext_gpus_per_node"] == 4
    assert "maxtext_thresholds" not in s  # enforced: the given thresholds judge


def test_only_a_file_with_maxtext_config_or_its_framework_is_upstream() -> None:
    assert is_upstream(upstream_file()) and is_upstream(TRAINING) and is_upstream({"framework": "jaxmaxtext"})
    assert not is_upstream({"container": {"image": "x"}, "paths": {}})


def broken(path: list[Any], value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(base if base is not None else upstream_file())
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


TWO_RUNS = ["BS=3,PRECISION=BF16,SL=128", "BS=2,PRECISION=BF16,SL=64"]
CONFIG = ["train_params", "maxtext_config"]
REFUSED = {
    "unknown-top": (broken(["train_parms"], {}), "train_parms: unknown key; did you mean 'train_params'"),
    "role-set": (broken([*CONFIG, "run_name"], "x"), "train_params.maxtext_config.run_name: set by the role"),
    "comment-in-config": (broken([*CONFIG, "_note"], "x"), "train_params.maxtext_config._note: comment keys"),
    "steps": (broken([*CONFIG, "steps"], "many"), "train_params.maxtext_config.steps: expected an integer"),
    "placeholder": (
        broken(["container", "env", "NCCL_IB_HCA"], "rdma0 <changeme>"),
        "container.env.NCCL_IB_HCA: still holds the placeholder '<changeme>'",
    ),
    "regex": (broken(["error_patterns", "bad"], "NCCL(ERROR"), "error_patterns.bad: invalid regex 'NCCL(ERROR'"),
    "convergence": (
        broken(["convergence", "target_value"], 10.0),
        "convergence: time-to-target loss has no equivalent in this collection yet; set convergence.target_value to 0",
    ),
    "loss-curve": (broken(["loss_curve", "enforce"], True), "loss_curve: the loss-curve slope check has no equivalent"),
    "checkpoint-resume": (
        broken(["checkpoint_resume", "enabled"], True),
        "checkpoint_resume: checkpoint save and resume has no equivalent",
    ),
    "checkpointing": (broken([*CONFIG, "enable_checkpointing"], True), "checkpointing is off in every run"),
    "two-sweeps": (
        broken(["runs"], TWO_RUNS),
        f"enables 2 sweeps ({', '.join(TWO_RUNS)}); each is a full training run and one playbook run trains one: "
        "choose it with -e maxtext_sweep=<name>",
    ),
    "undefined-sweep": (broken(["runs"], ["BS=9"]), "sweep 'BS=9' is enabled but not defined"),
    "fp8-recipe": (broken(["sweeps", "BS=1,PRECISION=FP8"], {}), "PRECISION=FP8 needs the GPU's FP8 recipe"),
    "enforce-without": (broken(["enforce_thresholds"], True), "enforce_thresholds: true, but no thresholds were given"),
    "unknown-nested": (
        broken(["training", "nccl", "ib_hcas"], "x", TRAINING),
        "training.nccl.ib_hcas: unknown key; did you mean 'ib_hca'",
    ),
    "schema": (broken(["schema_version"], 2, TRAINING), "schema_version: 2 is not 1"),
}


@pytest.mark.parametrize(("data", "message"), list(REFUSED.values()), ids=list(REFUSED))
def test_what_cannot_be_honoured_is_refused_naming_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(MaxtextConfigError) as refused:
        map_config(data, user="alice")
    assert message in str(refused.value)


def test_a_sweep_is_chosen_by_name_and_an_unknown_one_named_with_the_closest() -> None:
    data = broken(["runs"], ["BS=3,PRECISION=BF16,SL=128", "BS=2,PRECISION=BF16,SL=64"])
    s = map_config(data, user="alice", sweep="BS=2,PRECISION=BF16,SL=64")["settings"]
    assert s["maxtext_steps"] == 9 and s["maxtext_config_overrides"]["per_device_batch_size"] == 2
    with pytest.raises(
        MaxtextConfigError, match="maxtext_sweep: unknown key; did you mean 'BS=2,PRECISION=BF16,SL=64'"
    ):
        map_config(data, user="alice", sweep="BS=2,PRECISION=BF16,SL=65")


def test_the_container_block_must_be_the_inventorys() -> None:
    data = broken(["container", "image"], "rocm/jax-training:maxtext-v26.4")
    ok = map_config(data, user="alice", container={"image": "rocm/jax-training:maxtext-v26.4"})
    assert ok["settings"]["maxtext_env"]["NCCL_DEBUG"] == "VERSION"
    with pytest.raises(MaxtextConfigError, match=r"is not the inventory's cvs_container\.image 'other:1'"):
        map_config(data, user="alice", container={"image": "other:1"})
    with pytest.raises(MaxtextConfigError, match="the inventory runs on baremetal"):
        map_config(data, user="alice", container={})


def test_the_extra_vars_files_of_the_command_line_are_named() -> None:
    argv = ["ansible-playbook", "-i", "inv", "-e", "@a.json", "--extra-vars=@/b c.json", "-e@c.yml", "-e", "x=1",
            "--extra-vars", "@d.json", "play.yml"]  # fmt: skip
    assert extra_vars_files(argv) == ["a.json", "/b c.json", "c.yml", "d.json"]
    assert extra_vars_files(["ansible-playbook", "-e", "{}"]) == []
