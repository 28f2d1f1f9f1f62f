"""Unit tests for the container model (plugins/plugin_utils/_container/model.py) and its lifetime decisions."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.cvs.cluster.plugins.plugin_utils._container.lifetime import (
    LIFETIMES,
    LifetimeError,
    decide_lifetime,
    decide_rollback,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.model import (
    DEFAULT_RUNTIME_ARGS,
    ULIMIT_NAMES,
    ContainerConfigError,
    docker_params,
    merge_runtime_args,
    normalize_container,
    parse_device,
    parse_ulimit,
    parse_ulimits,
    parse_volume,
    podman_run_argv,
    present_device_specs,
)

BASE = {"image": "rocm/jax:latest", "name": "cvs-node"}
REPO = Path(__file__).resolve().parents[5]


def error(cfg, **kwargs) -> ContainerConfigError:
    with pytest.raises(ContainerConfigError) as info:
        normalize_container(cfg, **kwargs)
    return info.value


def args_of(**args) -> dict:
    return normalize_container({**BASE, "runtime": {"args": args}})["runtime"]["args"]


# --------------------------------------------------------------------------- defaults and merging


def test_defaults_are_the_cvs_gpu_defaults():
    cfg = normalize_container(BASE)
    args = cfg["runtime"]["args"]
    assert cfg["lifetime"] == "per_run"
    assert cfg["ssh_port"] == 2224
    assert cfg["runtime"]["name"] == "docker"
    assert args["privileged"] is True
    assert args["network_mode"] == "host" and args["ipc_mode"] == "host"
    assert [d["path_on_host"] for d in args["devices"]] == ["/dev/kfd", "/dev/dri", "/dev/infiniband"]
    assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"]
    assert "seccomp=unconfined" in args["security_opt"] and "apparmor=unconfined" in args["security_opt"]
    assert args["group_add"] == ["video"]
    assert {"name": "memlock", "soft": -1, "hard": -1} in args["ulimits"]
    assert "registry" not in cfg


def test_lists_append_scalars_override_ulimits_and_devices_by_key():
    args = merge_runtime_args(
        DEFAULT_RUNTIME_ARGS,
        {
            "privileged": False,
            "cap_add": ["NET_ADMIN", "SYS_PTRACE"],
            "ulimits": ["memlock:8192:8192", "nofile=1:2"],
            "devices": ["/dev/kfd:/dev/kfd:r", "/dev/nvme0"],
            "shm_size": "256m",
            "env": {"A": 1},
            "network": "bridge",
        },
    )
    assert args["privileged"] is False
    assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN", "NET_ADMIN"]
    assert args["ulimits"] == [
        {"name": "memlock", "soft": 8192, "hard": 8192},
        {"name": "stack", "soft": 67108864, "hard": 67108864},
        {"name": "nofile", "soft": 1, "hard": 2},
    ]
    assert [(d["path_on_host"], d["cgroup_permissions"]) for d in args["devices"]] == [
        ("/dev/kfd", "r"),
        ("/dev/dri", "rwm"),
        ("/dev/infiniband", "rwm"),
        ("/dev/nvme0", "rwm"),
    ]
    assert args["shm_size"] == "256m"
    assert args["env"] == {"A": "1"}
    assert args["network_mode"] == "bridge"
    assert DEFAULT_RUNTIME_ARGS["privileged"] is True  # defaults not mutated
    assert DEFAULT_RUNTIME_ARGS["ulimits"] == ["memlock=-1", "stack=67108864"]


def test_normalising_is_idempotent_and_does_not_touch_the_input():
    raw = {
        **BASE,
        "lifetime": "persistent",
        "image_tar": "/shared/cvs.tar",
        "env": {"GPUS": 8},
        "registry": {"server": "r.example", "username": "u", "password_file": "/etc/t"},
        "runtime": {
            "name": "podman",
            "args": {
                "ulimit": ["nofile=65535:65535"],
                "volumes": [{"source": "/d", "target": "/data", "read_only": True}],
                "devices": [{"path_on_host": "/dev/dri", "path_in_container": "/dev/dri"}],
                "labels": {"team": "gpu"},
                "command": ["sleep", 5],
            },
        },
    }
    before = copy.deepcopy(raw)
    once = normalize_container(raw)
    assert raw == before
    assert normalize_container(once) == once
    assert once["runtime"]["args"]["volumes"] == ["/d:/data:ro"]
    assert once["runtime"]["args"]["command"] == ["sleep", "5"]


@pytest.mark.parametrize(
    ("override", "field", "text"),
    [
        ({"cap_add": {"x": 1}}, "cvs_container.runtime.args.cap_add", "must be a list of strings"),
        ({"env": ["A=1"]}, "cvs_container.runtime.args.env", "must be a mapping"),
        ({"env": {"BAD NAME": 1}}, "cvs_container.runtime.args.env.BAD NAME", "not a valid environment variable"),
        ({"privileged": "maybe"}, "cvs_container.runtime.args.privileged", "must be true or false"),
        ({"shm_size": True}, "cvs_container.runtime.args.shm_size", "must be a size"),
        ({"bogus": 1}, "cvs_container.runtime.args.bogus", "is not a supported runtime argument"),
        ({"shm-sze": "1g"}, "cvs_container.runtime.args.shm-sze", "did you mean 'shm-size'"),
        ({"ulimts": []}, "cvs_container.runtime.args.ulimts", "did you mean 'ulimits'"),
        ({"network": "host", "network_mode": "bridge"}, "cvs_container.runtime.args.network_mode", "keep one"),
    ],
)
def test_wrong_runtime_args_name_the_field(override, field, text):
    exc = error({**BASE, "runtime": {"args": override}}, host="node7")
    assert exc.field == field
    assert str(exc).startswith(f"node7: {field}: ")
    assert text in str(exc)


# --------------------------------------------------------------------------- unknown keys (issue 15 item 6)


@pytest.mark.parametrize(
    ("cfg", "field", "suggestion"),
    [
        ({**BASE, "lifetme": "no_launch"}, "cvs_container.lifetme", "lifetime"),
        ({**BASE, "imgae": "x"}, "cvs_container.imgae", "image"),
        ({**BASE, "ssh-port": 2224}, "cvs_container.ssh-port", "ssh_port"),
        ({**BASE, "image_tar_scr": "/x"}, "cvs_container.image_tar_scr", "image_tar_src"),
        ({**BASE, "runtime": {"nmae": "docker"}}, "cvs_container.runtime.nmae", "name"),
        ({**BASE, "runtime": {"arg": {}}}, "cvs_container.runtime.arg", "args"),
        (
            {**BASE, "registry": {"username": "u", "password_flie": "/p"}},
            "cvs_container.registry.password_flie",
            "password_file",
        ),
        (
            {**BASE, "runtime": {"args": {"ulimits": [{"name": "nofile", "sfot": 1}]}}},
            "cvs_container.runtime.args.ulimits[0].sfot",
            "soft",
        ),
        (
            {**BASE, "runtime": {"args": {"devices": [{"path_on_hst": "/dev/kfd"}]}}},
            "cvs_container.runtime.args.devices[0].path_on_hst",
            "path_on_host",
        ),
        (
            {**BASE, "runtime": {"args": {"volumes": [{"source": "/a", "traget": "/b"}]}}},
            "cvs_container.runtime.args.volumes[0].traget",
            "target",
        ),
    ],
)
def test_unknown_key_anywhere_names_the_closest_valid_key(cfg, field, suggestion):
    exc = error(cfg, host="node1")
    assert exc.field == field
    assert f"did you mean {suggestion!r}?" in str(exc)
    assert str(exc).startswith("node1: ")


def test_unknown_key_without_a_close_match_lists_the_valid_keys():
    exc = error({**BASE, "zzzz": 1})
    assert "did you mean" not in str(exc)
    assert "valid keys: enabled, env, image, image_tar, image_tar_src, launch, lifetime" in str(exc)


def test_lifetime_typo_in_the_value_is_refused_with_a_suggestion():
    exc = error({**BASE, "lifetime": "per-run"})
    assert exc.field == "cvs_container.lifetime"
    assert "did you mean 'per_run'?" in str(exc)


# --------------------------------------------------------------------------- ulimits


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ("memlock=-1", ("memlock", -1, -1)),  # docker CLI and CVS cluster files (upstream default)
        ("nofile=65535:65535", ("nofile", 65535, 65535)),  # upstream CVS training configs
        ("nofile=1024:4096", ("nofile", 1024, 4096)),
        ("stack=67108864", ("stack", 67108864, 67108864)),
        ("nofile=1024:-1", ("nofile", 1024, -1)),
        (" nproc=10 ", ("nproc", 10, 10)),
        ("memlock:-1:-1", ("memlock", -1, -1)),  # community.docker docker_container
        ("nofile:20000:20000", ("nofile", 20000, 20000)),  # the simulated cluster's inventory
        ("core:0", ("core", 0, 0)),
        ({"name": "nofile", "soft": 1, "hard": 2}, ("nofile", 1, 2)),
        ({"name": "memlock", "soft": "-1", "hard": "-1"}, ("memlock", -1, -1)),
        ({"name": "rtprio", "soft": 5}, ("rtprio", 5, 5)),
    ],
)
def test_every_accepted_ulimit_form(form, expected):
    assert parse_ulimit(form, "f") == dict(zip(("name", "soft", "hard"), expected))
    args = args_of(ulimits=[form])
    assert dict(zip(("name", "soft", "hard"), expected)) in args["ulimits"]


@pytest.mark.parametrize("name", ULIMIT_NAMES)
def test_every_docker_ulimit_name(name):
    assert parse_ulimit(f"{name}=1", "f")["name"] == name


def test_compose_style_ulimit_mapping_and_single_string():
    assert parse_ulimits({"nofile": {"soft": 10, "hard": 20}, "nproc": 65535}, "f") == [
        {"name": "nofile", "soft": 10, "hard": 20},
        {"name": "nproc", "soft": 65535, "hard": 65535},
    ]
    assert parse_ulimits("memlock=-1", "f") == [{"name": "memlock", "soft": -1, "hard": -1}]


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("memlock", "is not a ulimit"),
        ("memlock=", "is not a ulimit"),
        ("=1", "is not a ulimit"),
        ("memlock=1:2:3", "is not a ulimit"),
        ("memlok=-1", "did you mean 'memlock'?"),
        ("memlock=unlimited", "is not an integer"),
        ("memlock=1.5", "is not an integer"),
        ("memlock=-2", "below -1"),
        ("nofile=100:10", "soft limit 100 is above the hard limit 10"),
        ("nofile=-1:10", "soft limit -1 is above the hard limit 10"),
        ("nofile 1024", "is not a ulimit"),
        (1024, "is not a ulimit"),
        (True, "is not a ulimit"),
        (["nofile=1"], "is not a ulimit"),
        ({"name": "nofile"}, "needs name and soft"),
        ({"soft": 1}, "needs name and soft"),
        ({"name": "nofile", "soft": True}, "is not an integer"),
        ({"name": "nofile", "soft": 1, "hard": 2, "kind": "x"}, "is not a known key"),
    ],
)
def test_every_refused_ulimit_form_names_path_and_forms(form, text):
    exc = error({**BASE, "runtime": {"args": {"ulimits": ["nofile=1", form]}}}, host="gpu-07")
    assert str(exc).startswith("gpu-07: cvs_container.runtime.args.ulimits[1]")
    assert text in str(exc)
    if "known key" not in text and "needs" not in text and "above" not in text and "below" not in text:
        assert "name=soft[:hard]" in str(exc) and "{name, soft, hard}" in str(exc)


def test_refused_ulimit_under_the_cvs_spelling_keeps_the_users_key():
    exc = error({**BASE, "runtime": {"args": {"ulimit": ["memlock"]}}})
    assert exc.field == "cvs_container.runtime.args.ulimit[0]"


@pytest.mark.parametrize("value", [42, True, None])
def test_ulimits_must_be_a_list(value):
    exc = error({**BASE, "runtime": {"args": {"ulimits": value}}})
    assert exc.field == "cvs_container.runtime.args.ulimits"
    assert "must be a list" in str(exc)


# --------------------------------------------------------------------------- devices


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ("/dev/kfd", ("/dev/kfd", "/dev/kfd", "rwm")),
        ("/dev/kfd:r", ("/dev/kfd", "/dev/kfd", "r")),
        ("/dev/kfd:mw", ("/dev/kfd", "/dev/kfd", "mw")),
        ("/dev/sda:/dev/xvda", ("/dev/sda", "/dev/xvda", "rwm")),
        ("/dev/sda:/dev/xvda:rw", ("/dev/sda", "/dev/xvda", "rw")),
        ({"path_on_host": "/dev/dri"}, ("/dev/dri", "/dev/dri", "rwm")),
        (
            {"path_on_host": "/dev/dri", "path_in_container": "/dev/gpu", "cgroup_permissions": "r"},
            ("/dev/dri", "/dev/gpu", "r"),
        ),
    ],
)
def test_every_accepted_device_form(form, expected):
    spec = dict(zip(("path_on_host", "path_in_container", "cgroup_permissions"), expected))
    assert parse_device(form, "f") == spec
    assert spec in args_of(devices=[form])["devices"]


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("dev/kfd", "must be absolute"),
        ("/dev/sda:xvda", "must be absolute"),
        ("/dev/sda:/dev/xvda:rwx", "not made of r, w, m"),
        ("/dev/sda:/dev/xvda:rrw", "not made of r, w, m"),
        ("/a:/b:rw:extra", "is not a device"),
        ("", "is not a device"),
        ("vendor.com/gpu=all", "must be absolute"),
        (7, "is not a device"),
        ({"path_in_container": "/dev/x"}, "needs path_on_host"),
        ({"path_on_host": "/dev/x", "cgroup_permissions": "x"}, "not made of r, w, m"),
    ],
)
def test_every_refused_device_form_names_path_and_forms(form, text):
    exc = error({**BASE, "runtime": {"args": {"devices": [form]}}}, host="n2")
    assert str(exc).startswith("n2: cvs_container.runtime.args.devices[0]")
    assert text in str(exc)
    assert "/host/path[:/container/path][:perms]" in str(exc) or "needs" in text


def test_present_devices_expand_directories_and_drop_absent_ones():
    specs = args_of(devices=["/dev/dri:/gpu:rw"])["devices"]
    present = ["/dev/kfd", "/dev/dri/card0", "/dev/dri/renderD128"]
    out = present_device_specs(specs, present)
    assert out == [
        {"path_on_host": "/dev/kfd", "path_in_container": "/dev/kfd", "cgroup_permissions": "rwm"},
        {"path_on_host": "/dev/dri/card0", "path_in_container": "/gpu/card0", "cgroup_permissions": "rw"},
        {"path_on_host": "/dev/dri/renderD128", "path_in_container": "/gpu/renderD128", "cgroup_permissions": "rw"},
    ]
    assert present_device_specs(specs, []) == []
    assert len(present_device_specs(specs, None)) == 3


# --------------------------------------------------------------------------- volumes


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ("/shared/datasets:/datasets:ro", "/shared/datasets:/datasets:ro"),
        ("/scratch:/scratch", "/scratch:/scratch"),
        ("/data", "/data"),  # anonymous volume
        ("cvs-cache:/cache", "cvs-cache:/cache"),  # named volume
        ("/a:/b:rw,rslave", "/a:/b:rw,rslave"),
        ("/a:/b:z", "/a:/b:z"),
        ("/a:/b:ro,Z,nocopy", "/a:/b:ro,Z,nocopy"),
        ({"source": "/a", "target": "/b"}, "/a:/b"),
        ({"source": "/a", "target": "/b", "read_only": True}, "/a:/b:ro"),
        ({"type": "volume", "source": "cache", "target": "/c"}, "cache:/c"),
        ({"target": "/anon"}, "/anon"),
    ],
)
def test_every_accepted_volume_form(form, expected):
    assert parse_volume(form, "f") == expected
    assert expected in args_of(volumes=[form])["volumes"]


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("data:/data", None),  # a named volume: accepted (control case)
        ("./data:/data", "neither an absolute host path nor a volume name"),
        ("/a:b", "must be absolute"),
        ("relative", "must be absolute"),
        ("/a:/b:rx", "unknown volume option 'rx'"),
        ("/a:/b:ro,rw", "conflicting volume options"),
        ("/a:/b:shared,slave", "conflicting volume options"),
        ("/a:/b:ro:z", "is not a volume"),
        ("", "is not a volume"),
        (5, "is not a volume"),
        ({"source": "/a"}, "needs target"),
        ({"source": "/a", "target": "b"}, "must be an absolute path"),
        ({"type": "tmpfs", "target": "/t"}, "must be bind or volume"),
        ({"source": "/a", "target": "/b", "read_only": "maybe"}, "must be true or false"),
    ],
)
def test_every_refused_volume_form_names_path_and_forms(form, text):
    cfg = {**BASE, "runtime": {"args": {"volumes": [form]}}}
    if text is None:
        assert normalize_container(cfg)["runtime"]["args"]["volumes"] == [form]
        return
    exc = error(cfg, host="n3")
    assert str(exc).startswith("n3: cvs_container.runtime.args.volumes[0]")
    assert text in str(exc)


def test_volume_lists_drop_duplicates():
    assert args_of(volumes=["/a:/a", "/a:/a", "/b:/b"])["volumes"] == ["/a:/a", "/b:/b"]


# --------------------------------------------------------------------------- top-level settings


@pytest.mark.parametrize(
    ("legacy", "lifetime"),
    [
        ({"enabled": True, "launch": True}, "per_run"),
        ({"enabled": True, "launch": False}, "no_launch"),
        ({"enabled": False}, "no_launch"),
        ({"launch": "false"}, "no_launch"),
    ],
)
def test_legacy_keys_map_with_a_warning(legacy, lifetime):
    warnings: list[str] = []
    cfg = normalize_container({**BASE, **legacy}, warn=warnings.append)
    assert cfg["lifetime"] == lifetime
    assert "launch" not in cfg and "enabled" not in cfg
    assert len(warnings) == 1 and "deprecated" in warnings[0]


def test_legacy_key_contradicting_lifetime_is_refused():
    exc = error({**BASE, "launch": True, "lifetime": "persistent"})
    assert exc.field == "cvs_container.launch"


@pytest.mark.parametrize(
    ("cfg", "field", "message"),
    [
        ({**BASE, "lifetime": "forever"}, "cvs_container.lifetime", "valid values: no_launch, per_run, persistent"),
        ({"name": "x"}, "cvs_container.image", "is required with lifetime per_run"),
        ({"lifetime": "no_launch"}, "cvs_container.name", "is required with lifetime no_launch"),
        ({**BASE, "ssh_port": "ssh"}, "cvs_container.ssh_port", "TCP port number"),
        ({**BASE, "ssh_port": 70000}, "cvs_container.ssh_port", "TCP port number"),
        ({**BASE, "ssh_port": True}, "cvs_container.ssh_port", "TCP port number"),
        ({**BASE, "runtime": {"name": "enroot"}}, "cvs_container.runtime.name", "valid values: docker, podman"),
        ({**BASE, "runtime": {"args": ["--privileged"]}}, "cvs_container.runtime.args", "must be a mapping"),
        ({**BASE, "runtime": "docker"}, "cvs_container.runtime", "must be a mapping"),
        ({**BASE, "env": "A=1"}, "cvs_container.env", "must be a mapping"),
        ({**BASE, "image": ""}, "cvs_container.image", "is required"),
        ({**BASE, "image": ["a"]}, "cvs_container.image", "non-empty string"),
        ({**BASE, "image_tar": "images/cvs.tar"}, "cvs_container.image_tar", "absolute path on the node"),
        ({**BASE, "image_tar": "/a.tar", "image_tar_src": "b.tar"}, "cvs_container.image_tar_src", "not both"),
        ("not a mapping", "cvs_container", "must be a mapping"),
    ],
)
def test_bad_settings(cfg, field, message):
    exc = error(cfg)
    assert exc.field == field
    assert message in str(exc)


def test_no_launch_needs_only_a_name():
    cfg = normalize_container({"lifetime": "no_launch", "name": "running"})
    assert cfg["name"] == "running" and "image" not in cfg


def test_image_tar_means_on_the_node_and_image_tar_src_on_the_controller():
    assert normalize_container({**BASE, "image_tar": "/shared/cvs.tar"})["image_tar"] == "/shared/cvs.tar"
    cfg = normalize_container({**BASE, "image_tar_src": "files/cvs.tar"})
    assert cfg["image_tar_src"] == "files/cvs.tar" and "image_tar" not in cfg


# --------------------------------------------------------------------------- registry login


def test_registry_is_the_one_login_key():
    cfg = normalize_container(
        {**BASE, "registry": {"server": "registry.example.com", "username": "robot", "password_file": "/etc/t"}}
    )
    assert cfg["registry"] == {"server": "registry.example.com", "username": "robot", "password_file": "/etc/t"}


def test_registry_in_runtime_args_is_upstreams_spelling():
    cfg = normalize_container({**BASE, "runtime": {"args": {"registry": {"username": "u", "password_file": "/t"}}}})
    assert cfg["registry"] == {"username": "u", "password_file": "/t"}
    assert "registry" not in cfg["runtime"]["args"]


def test_deprecated_cvs_registry_login_maps_to_a_controller_password_file():
    warnings: list[str] = []
    login = {"registry": "127.0.0.1:5000", "username": "u", "password_file": "/home/me/token"}
    cfg = normalize_container(BASE, warn=warnings.append, registry_login=login)
    assert cfg["registry"] == {"server": "127.0.0.1:5000", "username": "u", "password_file_src": "/home/me/token"}
    assert len(warnings) == 1 and "cvs_registry_login is deprecated" in warnings[0]
    assert "registry" not in normalize_container(BASE, registry_login={})


def test_two_registry_logins_are_refused():
    exc = error(
        {**BASE, "registry": {"username": "u", "password_file": "/t"}},
        registry_login={"registry": "r", "username": "u", "password_file": "/p"},
    )
    assert exc.field == "cvs_registry_login"
    assert "keep only cvs_container.registry" in str(exc)


@pytest.mark.parametrize(
    ("registry", "field", "text"),
    [
        ({"username": "u", "password": "s3cr3t-token"}, "cvs_container.registry.password", "inline registry passwords"),
        ({"username": "u"}, "cvs_container.registry", "neither"),
        ({"username": "u", "password_file": "/a", "password_file_src": "/b"}, "cvs_container.registry", "exactly one"),
        ({"password_file": "/a"}, "cvs_container.registry.username", "non-empty string"),
        ("robot:token", "cvs_container.registry", "must be a mapping"),
    ],
)
def test_bad_registry_never_echoes_a_secret(registry, field, text):
    exc = error({**BASE, "registry": registry})
    assert exc.field == field
    assert text in str(exc)
    assert "s3cr3t-token" not in str(exc)


def test_deprecated_login_with_an_unknown_key():
    exc = error(BASE, registry_login={"registy": "r", "username": "u", "password_file": "/p"})
    assert exc.field == "cvs_registry_login.registy"
    assert "did you mean 'registry'?" in str(exc)


# --------------------------------------------------------------------------- runtime translation


def test_docker_params_drop_absent_devices_and_carry_labels():
    cfg = normalize_container({**BASE, "env": {"GPUS": 8}, "runtime": {"args": {"shm_size": "1g"}}})
    params = docker_params(cfg, ["/dev/kfd"], {"cvs.run_id": "r1"})
    assert params["devices"] == ["/dev/kfd:/dev/kfd:rwm"]
    assert params["labels"] == {"cvs.run_id": "r1"}
    assert params["shm_size"] == "1g"
    assert params["env"] == {"GPUS": "8"}
    assert params["ulimits"] == ["memlock:-1:-1", "stack:67108864:67108864"]
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


# --------------------------------------------------------------------------- lifetime decision


def probes(**states):
    return [{"host": host, "state": state} for host, state in states.items()]


STATES = ("absent", "running", "stopped")


def _expected(lifetime: str, states: tuple[str, ...]) -> tuple[bool, str]:
    """The documented truth table, written independently of the implementation."""
    running = [s == "running" for s in states]
    if lifetime == "per_run":
        return (all(s == "absent" for s in states), "already exists on")
    if lifetime == "persistent":
        return (all(running) or not any(running), "refusing a mixed state")
    return (all(running), "is not running on")


@pytest.mark.parametrize("lifetime", LIFETIMES)
@pytest.mark.parametrize("states", list(itertools.product(STATES, repeat=2)))
def test_lifetime_decision_for_every_lifetime_and_existing_state(lifetime, states):
    decision = decide_lifetime(probes(n1=states[0], n2=states[1]), lifetime, "cvs-node")
    ok, refusal = _expected(lifetime, states)
    assert decision["ok"] is ok, decision
    if not ok:
        assert refusal in decision["message"]
        assert decision["launch"] == [] and decision["attach"] == []
        offenders = {
            "per_run": [h for h, s in zip(("n1", "n2"), states) if s != "absent"],
            "persistent": [h for h, s in zip(("n1", "n2"), states) if s != "running"],
            "no_launch": [h for h, s in zip(("n1", "n2"), states) if s != "running"],
        }[lifetime]
        assert ", ".join(offenders) in decision["message"]
        assert "'cvs-node'" in decision["message"]
        return
    assert decision["message"] == ""
    assert decision["attach"] == [h for h, s in zip(("n1", "n2"), states) if s == "running"]
    assert decision["launch"] == [h for h, s in zip(("n1", "n2"), states) if s != "running"]
    if lifetime == "no_launch":
        assert decision["launch"] == []


def test_lifetime_decision_refuses_on_errors_and_lost_hosts_for_every_lifetime():
    for lifetime in LIFETIMES:
        nodes = [{"host": "n1", "state": "absent"}, {"host": "n2", "error": "docker does not answer"}]
        decision = decide_lifetime(nodes, lifetime, "c", lost=["n3"])
        assert decision["ok"] is False and decision["launch"] == []
        assert decision["message"] == (
            "cvs.cluster.prepare failed before launching anything on n2: docker does not answer; "
            "n3: unreachable or failed earlier in the play"
        )


def test_persistent_mixed_state_names_both_sides():
    decision = decide_lifetime(probes(n1="running", n2="running", n3="absent"), "persistent", "cvs-node")
    assert "running on n1, n2 but not on n3" in decision["message"]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (([{"host": "n1", "state": "gone"}], "per_run", "c"), "state must be one of"),
        (([{"state": "absent"}], "per_run", "c"), "must be a mapping with host"),
        (([], "forever", "c"), "lifetime must be one of"),
    ],
)
def test_lifetime_decision_refuses_malformed_input(args, text):
    with pytest.raises(LifetimeError, match=text):
        decide_lifetime(*args)


def test_rollback_removes_only_what_this_run_started():
    nodes = [
        {"host": "n1", "started": True},
        {"host": "n2", "error": "image missing", "started": False},
        {"host": "n3", "started": False},  # attached to a container that existed before
    ]
    decision = decide_rollback(nodes, lost=["n4"])
    assert decision["ok"] is False
    assert decision["failed"] == ["n2", "n4"]
    assert decision["remove"] == ["n1"]
    assert decision["message"].startswith("cvs.cluster.prepare failed on n2, n4: n2: image missing; n4: unreachable.")


def test_rollback_includes_a_failed_node_that_started_its_container():
    decision = decide_rollback([{"host": "n1", "error": "sshd failed", "started": True}])
    assert decision["remove"] == ["n1"] and decision["failed"] == ["n1"]


def test_no_rollback_when_every_node_is_prepared():
    decision = decide_rollback([{"host": "n1", "started": True}, {"host": "n2", "started": False}], lost=[])
    assert decision == {"ok": True, "failed": [], "remove": [], "message": ""}


# --------------------------------------------------------------------------- shipped examples


def _example_containers():
    for path in sorted((REPO / "inventories" / "examples").glob("*.yml")):
        data = yaml.safe_load(path.read_text())
        text = path.read_text()
        if "cvs_container" in text:
            yield path.name, data["all"]["children"]["cvs_nodes"]["vars"]["cvs_container"]


@pytest.mark.parametrize(("name", "cfg"), list(_example_containers()))
def test_yaml_examples_normalise(name, cfg):
    out = normalize_container(cfg, host="example")
    assert normalize_container(out) == out
    assert re.match(r"^[\w./:-]+$", out["image"])


# --------------------------------------------------------------------------- the filters (thin wrappers)


def test_filters_wrap_errors_and_name_the_host():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.cvs.cluster.plugins.filter.container import FilterModule

    filters = FilterModule().filters()
    assert set(filters) == {
        "container_config",
        "docker_params",
        "podman_argv",
        "container_lifetime",
        "container_rollback",
    }
    with pytest.raises(AnsibleFilterError, match=r"^gpu1: cvs_container\.lifetme: .*did you mean 'lifetime'\?"):
        filters["container_config"]({**BASE, "lifetme": "no_launch"}, host="gpu1")
    normalized = filters["container_config"](BASE, host="gpu1")
    assert filters["docker_params"](normalized, [])["name"] == "cvs-node"
    assert filters["podman_argv"](normalized, [])[:2] == ["podman", "run"]
    decision = filters["container_lifetime"]([{"host": "n1", "state": "absent"}], "per_run", "c", [])
    assert decision == {"ok": True, "message": "", "launch": ["n1"], "attach": []}
    with pytest.raises(AnsibleFilterError, match="container_lifetime: n1: state must be one of"):
        filters["container_lifetime"]([{"host": "n1", "state": "?"}], "per_run", "c")
    assert filters["container_rollback"]([{"host": "n1", "started": True}], ["n2"])["remove"] == ["n1"]
