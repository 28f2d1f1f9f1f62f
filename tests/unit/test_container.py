"""Unit tests for the container settings logic (module_utils/_container.py)."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.module_utils._container import (
    DEFAULT_RUNTIME_ARGS,
    ContainerConfigError,
    docker_params,
    merge_runtime_args,
    normalize_container,
    podman_run_argv,
)

BASE = {"image": "rocm/jax:latest", "name": "cvs-node"}


def test_defaults_are_the_cvs_gpu_defaults():
    cfg = normalize_container(BASE)
    args = cfg["runtime"]["args"]
    assert cfg["lifetime"] == "per_run"
    assert cfg["ssh_port"] == 2224
    assert cfg["runtime"]["name"] == "docker"
    assert args["privileged"] is True
    assert args["network_mode"] == "host" and args["ipc_mode"] == "host"
    assert args["devices"] == ["/dev/kfd", "/dev/dri", "/dev/infiniband"]
    assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"]
    assert "seccomp=unconfined" in args["security_opt"] and "apparmor=unconfined" in args["security_opt"]
    assert args["group_add"] == ["video"]
    assert "memlock:-1:-1" in args["ulimits"]


def test_lists_append_scalars_override_ulimits_by_name():
    args = merge_runtime_args(
        DEFAULT_RUNTIME_ARGS,
        {
            "privileged": False,
            "cap_add": ["NET_ADMIN", "SYS_PTRACE"],
            "ulimits": ["memlock:8192:8192", "nofile:1:2"],
            "shm_size": "256m",
            "env": {"A": 1},
            "network": "bridge",
        },
    )
    assert args["privileged"] is False
    assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN", "NET_ADMIN"]
    assert args["ulimits"] == ["memlock:8192:8192", "stack:67108864:67108864", "nofile:1:2"]
    assert args["shm_size"] == "256m"
    assert args["env"] == {"A": "1"}
    assert args["network_mode"] == "bridge"
    assert DEFAULT_RUNTIME_ARGS["privileged"] is True  # defaults not mutated


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"cap_add": {"x": 1}}, "cvs_container.runtime.args.cap_add must be a list"),
        ({"env": ["A=1"]}, "cvs_container.runtime.args.env must be a mapping"),
        ({"privileged": "maybe"}, "cvs_container.runtime.args.privileged must be bool"),
        ({"shm_size": True}, "cvs_container.runtime.args.shm_size must be"),
        ({"bogus": 1}, "cvs_container.runtime.args.bogus is not a supported runtime argument"),
        ({"ulimits": ["memlock"]}, "ulimit 'memlock' is not name:soft[:hard]"),
    ],
)
def test_wrong_types_name_the_field(override, field):
    with pytest.raises(ContainerConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        merge_runtime_args(DEFAULT_RUNTIME_ARGS, override)


def test_runtime_args_must_be_a_mapping():
    with pytest.raises(ContainerConfigError, match=r"runtime.args must be a mapping, got list"):
        normalize_container({**BASE, "runtime": {"args": ["--privileged"]}})


@pytest.mark.parametrize(
    ("legacy", "lifetime"),
    [
        ({"enabled": True, "launch": True}, "per_run"),
        ({"enabled": True, "launch": False}, "no_launch"),
        ({"launch": "false"}, "no_launch"),
    ],
)
def test_legacy_keys_map_with_a_warning(legacy, lifetime):
    warnings: list[str] = []
    cfg = normalize_container({**BASE, **legacy}, warn=warnings.append)
    assert cfg["lifetime"] == lifetime
    assert "launch" not in cfg and "enabled" not in cfg
    assert len(warnings) == 1 and "deprecated" in warnings[0]


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({**BASE, "lifetime": "forever"}, "lifetime must be one of per_run, persistent, no_launch"),
        ({"name": "x"}, "cvs_container.image is required"),
        ({**BASE, "ssh_port": "ssh"}, "ssh_port must be a port number"),
        ({**BASE, "ssh_port": 70000}, "ssh_port out of range"),
        ({**BASE, "runtime": {"name": "enroot"}}, "runtime.name must be one of docker, podman"),
        ({**BASE, "env": "A=1"}, "cvs_container.env must be a mapping"),
    ],
)
def test_bad_settings(cfg, message):
    with pytest.raises(ContainerConfigError, match=message):
        normalize_container(cfg)


def test_docker_params_drop_absent_devices_and_carry_labels():
    cfg = normalize_container({**BASE, "env": {"GPUS": 8}, "runtime": {"args": {"shm_size": "1g"}}})
    params = docker_params(cfg, ["/dev/kfd"], {"cvs.run_id": "r1"})
    assert params["devices"] == ["/dev/kfd:/dev/kfd:rwm"]
    assert params["labels"] == {"cvs.run_id": "r1"}
    assert params["shm_size"] == "1g"
    assert params["env"] == {"GPUS": "8"}
    assert params["command"] == ["sleep", "infinity"]
    assert params["privileged"] is True


def test_docker_params_keep_privileged_false():
    cfg = normalize_container({**BASE, "runtime": {"args": {"privileged": False}}})
    assert docker_params(cfg, [])["privileged"] is False
    assert "devices" not in docker_params(cfg, [])


def test_podman_argv():
    cfg = normalize_container(
        {**BASE, "runtime": {"name": "podman", "args": {"privileged": False, "ulimits": ["nofile:10:20"]}}}
    )
    argv = podman_run_argv(cfg, [], {"cvs.managed": "true"})
    assert argv[:5] == ["podman", "run", "-d", "--name", "cvs-node"]
    assert "--privileged" not in argv
    assert argv[argv.index("--network") + 1] == "host"
    assert "nofile=10:20" in argv and "memlock=-1:-1" in argv
    assert argv[argv.index("--label") + 1] == "cvs.managed=true"
    assert argv[-3:] == ["rocm/jax:latest", "sleep", "infinity"]


def test_podman_argv_drops_shm_size_with_host_ipc():
    host_ipc = normalize_container({**BASE, "runtime": {"name": "podman", "args": {"shm_size": "1g"}}})
    assert "--shm-size" not in podman_run_argv(host_ipc)
    private = normalize_container({**BASE, "runtime": {"name": "podman", "args": {"shm_size": "1g", "ipc": "private"}}})
    argv = podman_run_argv(private)
    assert argv[argv.index("--shm-size") + 1] == "1g"
