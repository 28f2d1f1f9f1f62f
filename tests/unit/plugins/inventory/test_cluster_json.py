"""CVS cluster files as inventory: the pure converter and the cvs.cluster.cluster_json plugin."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.filter.container import FilterModule as ContainerFilters
from ansible_collections.cvs.cluster.plugins.inventory.cluster_json import InventoryModule
from ansible_collections.cvs.cluster.plugins.plugin_utils._container.model import normalize_container
from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.cluster_json import (
    ClusterFileError,
    convert_cluster,
    default_user_id,
    jump_control_path,
    load_cluster_json,
    looks_like_cluster_file,
    proxy_command_args,
)

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cluster_json"
EXAMPLE_INVENTORIES = ROOT / "inventories" / "examples"
ANSIBLE_INVENTORY = ROOT / ".venv" / "bin" / "ansible-inventory"


def load(name: str) -> dict[str, Any]:
    return load_cluster_json((FIXTURES / name).read_text())


def convert(name_or_data: str | dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    data = load(name_or_data) if isinstance(name_or_data, str) else name_or_data
    kwargs.setdefault("user_id", "alice")
    return convert_cluster(data, **kwargs)


def error_of(data: dict[str, Any], **kwargs: Any) -> ClusterFileError:
    with pytest.raises(ClusterFileError) as info:
        convert(data, **kwargs)
    return info.value


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "username": "{user-id}",
        "priv_key_file": "/home/{user-id}/.ssh/id_rsa",
        "head_node_dict": {"mgmt_ip": "192.0.2.1"},
        "node_dict": {"192.0.2.1": {"bmc_ip": "NA", "vpc_ip": "192.0.2.1"}, "192.0.2.2": {}},
    }
    data.update(changes)
    return data


# --------------------------------------------------------------------------- converter: nodes and SSH


def test_dict_node_dict_hosts_groups_and_vars() -> None:
    result = convert("baremetal_dict.json")
    assert list(result["hosts"]) == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert result["groups"] == {"cvs_nodes": ["192.0.2.11", "192.0.2.12", "192.0.2.13"], "cvs_head": ["192.0.2.12"]}
    assert result["hosts"]["192.0.2.11"] == {"ansible_host": "192.0.2.11", "cvs_vpc_ip": "198.51.100.11"}
    assert result["hosts"]["192.0.2.12"]["cvs_bmc_ip"] == "203.0.113.12"
    assert result["hosts"]["192.0.2.13"]["cvs_rack_id"] == "rack-01"
    assert result["group_vars"] == {
        "cvs_nodes": {
            "ansible_user": "alice",
            "ansible_ssh_private_key_file": "/home/alice/.ssh/id_rsa",
            "cvs_orchestrator": "baremetal",
            "cvs_env": {"PATH": "/opt/rocm/bin:$PATH", "NCCL_IB_GID_INDEX": "3", "RCCL_MSCCL_ENABLE": "false"},
        }
    }
    assert result["warnings"] == []
    assert result["deprecations"] == []


def test_user_id_defaults_to_current_user_like_cvs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "carol")
    assert default_user_id() == "carol"
    result = convert_cluster(load("baremetal_dict.json"))
    assert result["group_vars"]["cvs_nodes"]["ansible_user"] == "carol"
    monkeypatch.delenv("USER")
    monkeypatch.setenv("LOGNAME", "dave")
    assert default_user_id() == "dave"


def test_user_id_is_replaced_in_keys_too() -> None:
    data = minimal(node_dict={"{user-id}-node1": {}})
    data.pop("head_node_dict")
    assert list(convert(data, user_id="bob")["hosts"]) == ["bob-node1"]


def test_list_node_dict_with_hostname_and_plain_addresses() -> None:
    result = convert("list_nodes.json")
    assert result["groups"]["cvs_nodes"] == ["gpu-a", "192.0.2.22", "192.0.2.23"]
    assert result["groups"]["cvs_head"] == ["gpu-a"]  # no head_node_dict: the first node
    assert result["hosts"]["gpu-a"] == {"ansible_host": "192.0.2.21", "cvs_vpc_ip": "198.51.100.21"}
    assert result["hosts"]["192.0.2.22"] == {"ansible_host": "192.0.2.22", "cvs_vpc_ip": "192.0.2.22"}
    assert result["hosts"]["192.0.2.23"] == {"ansible_host": "192.0.2.23", "cvs_vpc_ip": "192.0.2.23"}


def test_key_file_tilde_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/erin")
    result = convert("list_nodes.json")
    assert result["group_vars"]["cvs_nodes"]["ansible_ssh_private_key_file"] == "/home/erin/.ssh/cluster_ed25519"


def test_password_is_kept_verbatim_and_only_when_given() -> None:
    result = convert("list_nodes.json")
    assert result["group_vars"]["cvs_nodes"]["ansible_password"] == "s3cret-{user-id}"  # secrets are opaque
    assert "ansible_password" not in convert("baremetal_dict.json")["group_vars"]["cvs_nodes"]
    assert "ansible_password" not in convert(minimal(password=""))["group_vars"]["cvs_nodes"]


def test_password_never_appears_in_errors_or_warnings() -> None:
    secret = "hunter2-very-secret"
    data = minimal(password=secret, racks={"switch_ssh_password": secret}, orchestrator="bogus")
    error = error_of(data)
    assert secret not in str(error)
    data["orchestrator"] = "baremetal"
    result = convert(data)
    assert not any(secret in message for message in result["warnings"])
    assert result["warnings"] == [
        "racks: ignored (rack switch trays serve upstream's 'cvs exec' on switches; nothing here logs in to switches)"
    ]
    wrong_type = error_of(minimal(password=12345678))
    assert wrong_type.field == "password"
    assert "12345678" not in str(wrong_type)


def test_extra_node_attributes_are_kept() -> None:
    data = minimal(node_dict={"192.0.2.1": {"vpc_ip": "NA", "switch_port": "eth1/1", "_note": "x"}})
    assert convert(data)["hosts"]["192.0.2.1"]["cvs_node_extra"] == {"switch_port": "eth1/1"}


# --------------------------------------------------------------------------- converter: head node


def test_head_option_overrides_head_node_dict() -> None:
    assert convert("baremetal_dict.json", head="192.0.2.13")["groups"]["cvs_head"] == ["192.0.2.13"]


@pytest.mark.parametrize("head", ["gpu-a", "192.0.2.21", "198.51.100.21", "GPU-A"])
def test_head_matches_name_address_or_vpc_ip(head: str) -> None:
    assert convert("list_nodes.json", head=head)["groups"]["cvs_head"] == ["gpu-a"]


def test_a_head_outside_node_dict_is_a_jump_host_every_node_is_reached_through() -> None:
    result = convert(minimal(head_node_dict={"mgmt_ip": "192.0.2.99"}), user_id="ops")
    assert result["groups"]["cvs_head"] == ["192.0.2.1"]  # the first node: nothing runs on the jump host
    assert "192.0.2.99" not in result["hosts"]
    group = result["group_vars"]["cvs_nodes"]
    assert group["cvs_jump_host"] == "192.0.2.99"
    argv = shlex.split(group["ansible_ssh_common_args"])  # how ansible's ssh connection splits it
    assert argv[0] == "-o" and argv[1].startswith("ProxyCommand=")
    assert shlex.split(argv[1].removeprefix("ProxyCommand=")) == [
        "ssh", "-o", "BatchMode=yes", "-i", "/home/ops/.ssh/id_rsa", "-l", "ops", "-W", "%h:%p", "--", "192.0.2.99"
    ]  # fmt: skip
    # a ControlMaster opened without the jump host (same host, port, user) is never reused for this route
    assert group["ansible_control_path"] == jump_control_path("192.0.2.99")
    route = hashlib.sha1(b"192.0.2.99").hexdigest()[:8]
    assert group["ansible_control_path"] % {"directory": "/cp"} == f"/cp/j{route}-%C"
    assert jump_control_path("192.0.2.98") != group["ansible_control_path"]


def test_the_jump_command_quotes_every_value_and_doubles_ssh_percent_tokens() -> None:
    args = proxy_command_args("jump.example", "o'p$(touch /tmp/x)", "/k%d/key; rm -rf /", "-o ConnectTimeout=5")
    command = shlex.split(shlex.split(args)[1].removeprefix("ProxyCommand="))
    assert command == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-i", "/k%%d/key; rm -rf /",
                       "-l", "o'p$(touch /tmp/x)", "-W", "%h:%p", "--", "jump.example"]  # fmt: skip
    for bad in ("-oProxyCommand=x", "a b", "", "gpu01$(touch${IFS}/tmp/pwned)", "a;b"):
        with pytest.raises(ClusterFileError, match="is not a host address or name"):
            proxy_command_args(bad, None, None)


def test_the_head_option_must_name_a_node() -> None:
    assert error_of(minimal(), head="jumphost").field == "head"


def test_empty_head_means_first_node() -> None:
    data = minimal(head_node_dict={"mgmt_ip": ""})
    assert convert(data)["groups"]["cvs_head"] == ["192.0.2.1"]


# --------------------------------------------------------------------------- converter: errors


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"username": "<changeme>"}, "username"),
        ({"priv_key_file": "/home/<CHANGEME>/.ssh/id_rsa"}, "priv_key_file"),
        ({"password": "<changeme>"}, "password"),
        ({"env_vars": {"ROCM_PATH": "<changeme>"}}, "env_vars.ROCM_PATH"),
        ({"node_dict": {"<changeme>": {}}}, "node_dict.<changeme>"),
        (
            {"container": {"runtime": {"args": {"volumes": ["/a:/a", "<changeme>:/b"]}}}},
            "container.runtime.args.volumes[1]",
        ),
    ],
)
def test_changeme_anywhere_names_the_key_path(change: dict[str, Any], field: str) -> None:
    error = error_of(minimal(**change))
    assert error.field == field
    assert "<changeme>" in str(error)


def test_changeme_fixture_names_node_attribute() -> None:
    with pytest.raises(ClusterFileError, match=r"^node_dict\.192\.0\.2\.62\.bmc_ip: .*<changeme>"):
        convert("changeme.json")


def test_changeme_in_comment_keys_is_fine() -> None:
    assert convert(minimal(_comment="replace every <changeme>"))["groups"]["cvs_head"] == ["192.0.2.1"]


def test_unfilled_cvs_template_placeholders_are_errors() -> None:
    with pytest.raises(ClusterFileError) as info:
        convert("template_unfilled.json")
    assert info.value.field == "node_dict.{xx.xx.xx.xx|hostname-1}"
    assert "placeholder" in str(info.value)


def test_duplicate_node_key_in_json_text() -> None:
    with pytest.raises(ClusterFileError) as info:
        load("duplicate_node.json")
    assert info.value.field == "node_dict.192.0.2.71"
    assert "listed twice" in str(info.value)


def test_duplicate_top_level_key_in_json_text() -> None:
    with pytest.raises(ClusterFileError, match=r"^username: key is listed twice"):
        load_cluster_json('{"username": "a", "node_dict": {"192.0.2.1": {}}, "username": "b"}')
    # repeated comment keys are harmless
    assert load_cluster_json('{"_c": 1, "_c": 2, "node_dict": {}}')["_c"] == 2


@pytest.mark.parametrize(
    "nodes",
    [
        ["192.0.2.1", {"mgmt_ip": "192.0.2.1"}],
        [{"mgmt_ip": "192.0.2.1", "hostname": "a"}, {"mgmt_ip": "192.0.2.2", "hostname": "A"}],
        {"192.0.2.1": {"hostname": "gpu"}, "gpu": {}},
        {"gpu-1.example": {}, "GPU-1.example": {}},
    ],
)
def test_a_node_listed_twice_is_an_error(nodes: Any) -> None:
    data = minimal(node_dict=nodes)
    data.pop("head_node_dict")
    error = error_of(data)
    assert error.field is not None and error.field.startswith("node_dict")
    assert "listed twice" in str(error)


@pytest.mark.parametrize("nodes", [{}, [], {"_comment": "no nodes yet"}])
def test_empty_node_list_is_an_error(nodes: Any) -> None:
    error = error_of(minimal(node_dict=nodes))
    assert error.field == "node_dict"
    assert "no nodes" in str(error)


def test_empty_fixture_and_missing_node_dict() -> None:
    with pytest.raises(ClusterFileError, match=r"^node_dict: lists no nodes"):
        convert("empty_nodes.json")
    data = minimal()
    del data["node_dict"]
    assert error_of(data).field == "node_dict"


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"node_dict": "192.0.2.1"}, "node_dict", "mapping of address"),
        ({"node_dict": {"192.0.2.1": ["NA"]}}, "node_dict.192.0.2.1", "mapping of node attributes"),
        ({"node_dict": [{"bmc_ip": "NA"}]}, "node_dict[0]", "mgmt_ip"),
        ({"node_dict": [42]}, "node_dict[0]", "got a number"),
        ({"node_dict": {"192.0.2.1": {"vpc_ip": 7}}}, "node_dict.192.0.2.1.vpc_ip", "a string"),
        ({"head_node_dict": "192.0.2.1"}, "head_node_dict", "a mapping"),
        ({"username": ["a"]}, "username", "a string"),
        ({"env_vars": ["A=1"]}, "env_vars", "mapping"),
        ({"env_vars": {"A": {"b": 1}}}, "env_vars.A", "string or number"),
        ({"env_vars": {"BAD NAME": "1"}}, "env_vars.BAD NAME", "not a valid environment variable name"),
        ({"container": ["docker"]}, "container", "a mapping"),
        ({"container": {"runtime": "docker"}}, "container.runtime", "a mapping"),
        ({"container": {"runtime": {"args": ["--privileged"]}}}, "container.runtime.args", "a mapping"),
        ({"container": {"runtime": {"args": {"volumes": {"a": 1}}}}}, "container.runtime.args.volumes", "a list"),
        (
            {"container": {"runtime": {"args": {"ulimit": ["memlock"]}}}},
            "container.runtime.args.ulimit[0]",
            "name=soft",
        ),
        ({"container": {"image": "i", "lifetme": "no_launch"}}, "container.lifetme", "did you mean 'lifetime'?"),
        ({"container": {"runtime": {"args": {"privileged": "maybe"}}}}, "container.runtime.args.privileged", "true or"),
        ({"container": {"runtime": {"args": {"shm_size": True}}}}, "container.runtime.args.shm_size", "size"),
        ({"container": {"runtime": {"args": {"env": [1]}}}}, "container.runtime.args.env", "mapping"),
        ({"container": {"lifetime": "forever"}}, "container.lifetime", "valid values: no_launch, per_run, persistent"),
        ({"container": {"ssh_port": 0}}, "container.ssh_port", "TCP port"),
        ({"container": {"launch": "maybe"}}, "container.launch", "true or false"),
        ({"orchestrator": "kubernetes"}, "orchestrator", "unknown orchestrator"),
    ],
)
def test_wrong_types_name_the_field(change: dict[str, Any], field: str, text: str) -> None:
    error = error_of(minimal(**change))
    assert error.field == field
    assert text in str(error)


# --------------------------------------------------------------------------- converter: orchestrator and container


def test_container_file_maps_to_cvs_container() -> None:
    result = convert("container.json", user_id="bob")
    group_vars = result["group_vars"]["cvs_nodes"]
    assert group_vars["cvs_orchestrator"] == "container"
    assert group_vars["cvs_env"] == {}
    container = group_vars["cvs_container"]
    # the inventory hands on the container model's normalised form
    assert normalize_container(container) == container
    assert {k: container[k] for k in ("lifetime", "image", "name", "image_tar", "env", "ssh_port")} == {
        "lifetime": "persistent",
        "image": "rocm/cvs:latest",
        "name": "cvs_bob",
        "image_tar": "/shared/images/cvs.tar",
        "env": {"GPUS": "8", "MULTINODE": "true"},
        "ssh_port": 2224,
    }
    assert container["registry"] == {"username": "myuser", "password_file": "/home/bob/.docker_token"}
    args = container["runtime"]["args"]
    assert container["runtime"]["name"] == "docker"
    assert (args["network_mode"], args["ipc_mode"], args["privileged"], args["shm_size"]) == (
        "host",
        "host",
        True,
        "128G",
    )
    assert args["volumes"] == ["/home/bob/data:/data:ro"]
    assert [d["path_on_host"] for d in args["devices"]] == ["/dev/kfd", "/dev/dri", "/dev/infiniband"]
    assert args["env"] == {"HIP_VISIBLE_DEVICES": "0,1"}
    assert args["cap_add"] == ["SYS_PTRACE", "IPC_LOCK", "SYS_ADMIN"]
    assert {"name": "memlock", "soft": -1, "hard": -1} in args["ulimits"]
    assert "registry" not in args and "network" not in args and "ulimit" not in args
    assert result["warnings"] == []


def test_container_defaults() -> None:
    data = minimal(orchestrator="container", container={"image": "rocm/cvs:latest"})
    container = convert(data)["group_vars"]["cvs_nodes"]["cvs_container"]
    assert container == normalize_container({"image": "rocm/cvs:latest"})
    assert container["lifetime"] == "per_run" and container["runtime"]["name"] == "docker"


@pytest.mark.parametrize(
    ("value", "orchestrator", "runtime"),
    [
        (None, "baremetal", None),
        ("baremetal", "baremetal", None),
        ("Bare-Metal", "baremetal", None),
        ("container", "container", "docker"),
        ("CONTAINER", "container", "docker"),
        ("docker", "container", "docker"),
        ("podman", "container", "podman"),
    ],
)
def test_orchestrator_spellings(value: str | None, orchestrator: str, runtime: str | None) -> None:
    data = minimal(container={"image": "rocm/cvs:latest"})
    if value is not None:
        data["orchestrator"] = value
    group_vars = convert(data)["group_vars"]["cvs_nodes"]
    assert group_vars["cvs_orchestrator"] == orchestrator
    if runtime:
        assert group_vars["cvs_container"]["runtime"]["name"] == runtime


def test_orchestrator_runtime_mismatch_is_an_error() -> None:
    data = minimal(orchestrator="docker", container={"image": "i", "runtime": {"name": "podman"}})
    assert error_of(data).field == "container.runtime.name"


def test_comment_only_container_block_on_baremetal_is_no_container() -> None:
    result = convert(minimal(container={"_comment": "see README"}))
    assert "cvs_container" not in result["group_vars"]["cvs_nodes"]
    assert result["warnings"] == []


def test_container_block_on_baremetal_is_kept_with_a_warning() -> None:
    result = convert(minimal(container={"image": "rocm/cvs:latest"}))
    assert result["group_vars"]["cvs_nodes"]["cvs_orchestrator"] == "baremetal"
    assert result["group_vars"]["cvs_nodes"]["cvs_container"]["image"] == "rocm/cvs:latest"
    assert any("unused" in message for message in result["warnings"])


@pytest.mark.parametrize(
    ("container", "field"),
    [
        (None, "container"),
        ({}, "container"),
        ({"_comment": "fill me in"}, "container"),
        ({"lifetime": "per_run"}, "container.image"),
        ({"lifetime": "no_launch", "image": "i"}, "container.name"),
        ({"launch": False, "image": "i"}, "container.name"),
    ],
)
def test_container_orchestrator_needs_what_it_starts(container: Any, field: str) -> None:
    data = minimal(orchestrator="container")
    if container is not None:
        data["container"] = container
    assert error_of(data).field == field


def test_no_launch_needs_no_image() -> None:
    data = minimal(orchestrator="container", container={"lifetime": "no_launch", "name": "running"})
    assert convert(data)["group_vars"]["cvs_nodes"]["cvs_container"]["lifetime"] == "no_launch"


def test_persistent_without_name_warns() -> None:
    data = minimal(orchestrator="container", container={"lifetime": "persistent", "image": "i"})
    assert any("pin a name" in message for message in convert(data)["warnings"])


def test_legacy_launch_true_maps_to_per_run_with_deprecation() -> None:
    result = convert("legacy_launch.json")
    container = result["group_vars"]["cvs_nodes"]["cvs_container"]
    assert container["lifetime"] == "per_run"
    assert "enabled" not in container and "launch" not in container
    assert len(result["deprecations"]) == 1
    message = result["deprecations"][0]
    assert message in result["warnings"]
    assert "deprecated" in message and "container.launch" in message and "'per_run'" in message


@pytest.mark.parametrize(
    ("legacy", "lifetime"),
    [
        ({"launch": True}, "per_run"),
        ({"launch": False}, "no_launch"),
        ({"enabled": True}, "per_run"),
        ({"enabled": False}, "no_launch"),
        ({"enabled": False, "launch": True}, "no_launch"),
        ({"enabled": True, "launch": False}, "no_launch"),
    ],
)
def test_legacy_switches(legacy: dict[str, bool], lifetime: str) -> None:
    data = minimal(orchestrator="container", container={"image": "i", "name": "n", **legacy})
    result = convert(data)
    assert result["group_vars"]["cvs_nodes"]["cvs_container"]["lifetime"] == lifetime
    assert result["deprecations"] and all("deprecated" in message for message in result["deprecations"])


def test_legacy_switch_agreeing_with_lifetime_only_warns() -> None:
    data = minimal(orchestrator="container", container={"image": "i", "launch": True, "lifetime": "per_run"})
    assert len(convert(data)["deprecations"]) == 1


def test_legacy_switch_contradicting_lifetime_is_an_error() -> None:
    data = minimal(orchestrator="container", container={"image": "i", "launch": True, "lifetime": "persistent"})
    error = error_of(data)
    assert error.field == "container.launch"
    assert "persistent" in str(error)


def test_runtime_arg_conflict_and_unknown_args() -> None:
    conflict = minimal(container={"image": "i", "runtime": {"args": {"network": "host", "network_mode": "bridge"}}})
    assert error_of(conflict).field == "container.runtime.args.network_mode"
    same = minimal(container={"image": "i", "runtime": {"args": {"network": "host", "network_mode": "host"}}})
    assert convert(same)["group_vars"]["cvs_nodes"]["cvs_container"]["runtime"]["args"]["network_mode"] == "host"
    unknown = minimal(container={"image": "i", "runtime": {"args": {"pids_limit": 100}}})
    error = error_of(unknown)
    assert error.field == "container.runtime.args.pids_limit"
    assert "is not a supported runtime argument" in str(error)
    typo = minimal(container={"image": "i", "runtime": {"args": {"ulimits": ["memlock=-1"], "privilegd": True}}})
    assert "did you mean 'privileged'?" in str(error_of(typo))


def test_container_level_volumes_join_runtime_volumes() -> None:
    data = minimal(container={"image": "i", "volumes": ["/a:/a"], "runtime": {"args": {"volumes": ["/b:/b", "/a:/a"]}}})
    args = convert(data)["group_vars"]["cvs_nodes"]["cvs_container"]["runtime"]["args"]
    assert args["volumes"] == ["/a:/a", "/b:/b"]


def test_inline_registry_password_is_refused_without_echo() -> None:
    data = minimal(container={"image": "i", "registry": {"username": "u", "password": "tok3n-value"}})
    error = error_of(data)
    assert error.field == "container.registry.password"
    assert "tok3n-value" not in str(error)
    missing = minimal(container={"image": "i", "runtime": {"args": {"registry": {"username": "u"}}}})
    error = error_of(missing)
    assert error.field == "container.runtime.args.registry"
    assert "password_file" in str(error)


def test_unsupported_runtime_is_refused() -> None:
    data = minimal(orchestrator="enroot", container={"image": "i"})
    error = error_of(data)
    assert error.field == "container.runtime.name"
    assert "'enroot'" in str(error) and "docker, podman" in str(error)


def test_input_is_not_modified() -> None:
    data = load("container.json")
    before = copy.deepcopy(data)
    convert(data)
    assert data == before


# --------------------------------------------------------------------------- recognising files


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"node_dict": {}, "username": "u"}, True),
        ({"node_dict": [], "head_node_dict": {}}, True),
        ({"node_dict": {}, "priv_key_file": "k"}, True),
        ({"node_dict": {}}, False),
        ({"username": "u", "priv_key_file": "k"}, False),
        ({"all": {"hosts": {}}}, False),
        (["node_dict", "username"], False),
        ("node_dict", False),
    ],
)
def test_looks_like_cluster_file(data: Any, expected: bool) -> None:
    assert looks_like_cluster_file(data) is expected


def test_all_fixtures_but_static_inventory_look_like_cluster_files() -> None:
    for path in FIXTURES.glob("*.json"):
        if path.name == "duplicate_node.json":
            continue
        assert looks_like_cluster_file(json.loads(path.read_text())) is (path.name != "static_inventory.json"), path


def test_invalid_json_is_reported_with_position() -> None:
    with pytest.raises(ClusterFileError, match=r"not valid JSON: .*line 1"):
        load_cluster_json('{"node_dict": {},}')
    with pytest.raises(ClusterFileError, match="JSON object"):
        load_cluster_json("[1, 2]")


def test_verify_file(tmp_path: Path) -> None:
    plugin = InventoryModule()
    source = tmp_path / "cluster.yml"
    source.write_text("---\nplugin: cvs.cluster.cluster_json  # CVS file\npath: c.json\n")
    yaml_inventory = tmp_path / "hosts.yml"
    yaml_inventory.write_text("all:\n  hosts:\n    192.0.2.1:\n")
    other_plugin = tmp_path / "ec2.yml"
    other_plugin.write_text("plugin: amazon.aws.aws_ec2\n")
    ini = tmp_path / "cluster.ini"
    ini.write_text("[all]\n192.0.2.1\n")
    assert plugin.verify_file(str(FIXTURES / "baremetal_dict.json"))
    assert plugin.verify_file(str(FIXTURES / "changeme.json"))  # ours, even if invalid: parse() reports it
    assert plugin.verify_file(str(FIXTURES / "duplicate_node.json"))
    assert plugin.verify_file(str(source))
    assert not plugin.verify_file(str(FIXTURES / "static_inventory.json"))
    static_with_duplicates = tmp_path / "static.json"
    static_with_duplicates.write_text('{"all": {"hosts": {}}, "all": {"vars": {"node_dict": 1}}}')
    assert not plugin.verify_file(str(static_with_duplicates))
    assert not plugin.verify_file(str(yaml_inventory))
    assert not plugin.verify_file(str(other_plugin))
    assert not plugin.verify_file(str(ini))
    assert not plugin.verify_file(str(tmp_path / "missing.json"))
    assert not plugin.verify_file(str(tmp_path))


# --------------------------------------------------------------------------- ansible-inventory end to end


def _plain(value: Any) -> Any:
    """Undo ansible-inventory's marking of untrusted strings ({"__ansible_unsafe": "..."})."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def run_inventory(source: Path, *, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    environment = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "USER": "alice",
        **(env or {}),
    }
    proc = subprocess.run(
        [str(ANSIBLE_INVENTORY), "-i", str(source), "--list"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=str(ROOT),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return _plain(json.loads(proc.stdout)), proc.stderr


def group_hosts(listing: dict[str, Any], group: str) -> list[str]:
    return listing.get(group, {}).get("hosts", [])


def test_ansible_inventory_reads_a_cluster_json_directly() -> None:
    listing, stderr = run_inventory(FIXTURES / "baremetal_dict.json")
    assert group_hosts(listing, "cvs_nodes") == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert group_hosts(listing, "cvs_head") == ["192.0.2.12"]
    hostvars = listing["_meta"]["hostvars"]["192.0.2.11"]
    assert hostvars["ansible_host"] == "192.0.2.11"
    assert hostvars["ansible_user"] == "alice"
    assert hostvars["ansible_ssh_private_key_file"] == "/home/alice/.ssh/id_rsa"
    assert hostvars["cvs_orchestrator"] == "baremetal"
    assert hostvars["cvs_env"]["PATH"] == "/opt/rocm/bin:$PATH"
    assert "WARNING" not in stderr


def test_ansible_inventory_yaml_source_with_options(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "clusters"
    cluster_dir.mkdir()
    (cluster_dir / "mine.json").write_text((FIXTURES / "container.json").read_text())
    source = tmp_path / "cluster.yml"
    source.write_text(
        "plugin: cvs.cluster.cluster_json\n"
        "path: clusters/mine.json\n"
        "user_id: bob\n"
        "head: 192.0.2.32\n"
        "keyed_groups:\n"
        "  - key: cvs_orchestrator\n"
        "    prefix: orchestrator\n"
    )
    listing, _ = run_inventory(source)
    assert group_hosts(listing, "cvs_nodes") == ["192.0.2.31", "192.0.2.32"]
    assert group_hosts(listing, "cvs_head") == ["192.0.2.32"]
    assert group_hosts(listing, "orchestrator_container") == ["192.0.2.31", "192.0.2.32"]
    hostvars = listing["_meta"]["hostvars"]["192.0.2.31"]
    assert hostvars["ansible_user"] == "bob"
    assert hostvars["cvs_container"]["name"] == "cvs_bob"
    assert hostvars["cvs_container"]["runtime"]["args"]["network_mode"] == "host"
    assert hostvars["cvs_container"]["ssh_port"] == 2224


def test_ansible_inventory_options_from_environment() -> None:
    listing, _ = run_inventory(FIXTURES / "baremetal_dict.json", env={"CVS_USER_ID": "svc", "CVS_HEAD_NODE": ""})
    assert listing["_meta"]["hostvars"]["192.0.2.11"]["ansible_user"] == "svc"
    assert group_hosts(listing, "cvs_head") == ["192.0.2.12"]  # empty means unset
    listing, _ = run_inventory(FIXTURES / "baremetal_dict.json", env={"CVS_HEAD_NODE": "198.51.100.11"})
    assert group_hosts(listing, "cvs_head") == ["192.0.2.11"]


def test_ansible_inventory_keeps_nested_node_attributes(tmp_path: Path) -> None:
    cluster = tmp_path / "nested.json"
    cluster.write_text(json.dumps(minimal(node_dict={"192.0.2.1": {"labels": {"pool": "a", "tier": [1, 2]}}})))
    listing, _ = run_inventory(cluster)
    assert listing["_meta"]["hostvars"]["192.0.2.1"]["cvs_node_extra"] == {"labels": {"pool": "a", "tier": [1, 2]}}


def test_ansible_inventory_shows_the_deprecation() -> None:
    # ansible-test units turns deprecation warnings off in its environment; a user's default shows them
    listing, stderr = run_inventory(FIXTURES / "legacy_launch.json", env={"ANSIBLE_DEPRECATION_WARNINGS": "true"})
    assert listing["_meta"]["hostvars"]["192.0.2.51"]["cvs_container"]["lifetime"] == "per_run"
    assert "DEPRECATION WARNING" in stderr
    assert "container.launch" in stderr


def test_ansible_inventory_invalid_json_file_reports_the_field() -> None:
    listing, stderr = run_inventory(FIXTURES / "changeme.json")
    assert "node_dict.192.0.2.62.bmc_ip" in stderr and "<changeme>" in stderr
    assert "_meta" not in listing or not listing["_meta"]["hostvars"]
    # the builtin yaml plugin did not turn the file into groups
    assert "node_dict" not in listing and "head_node_dict" not in listing


def test_ansible_inventory_invalid_yaml_source_fails(tmp_path: Path) -> None:
    source = tmp_path / "dup.yml"
    source.write_text(f"plugin: cvs.cluster.cluster_json\npath: {FIXTURES / 'duplicate_node.json'}\n")
    proc = subprocess.run(
        [str(ANSIBLE_INVENTORY), "-i", str(source), "--list"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1",
        },
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "node_dict.192.0.2.71: node is listed twice" in proc.stderr


def test_ansible_inventory_leaves_other_json_to_other_plugins() -> None:
    listing, _ = run_inventory(FIXTURES / "static_inventory.json")
    assert group_hosts(listing, "web") == ["192.0.2.91"]


EXAMPLE_FILES = sorted(path for path in EXAMPLE_INVENTORIES.iterdir() if path.suffix in (".yml", ".yaml", ".json"))


def test_examples_exist() -> None:
    names = {path.name for path in EXAMPLE_FILES}
    assert {"baremetal.yml", "container.yml", "three-node.yml", "legacy-cluster.json", "legacy-cluster.yml"} <= names


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda path: path.name)
def test_example_parses_with_one_head_within_nodes(example: Path) -> None:
    listing, stderr = run_inventory(example)
    nodes = group_hosts(listing, "cvs_nodes")
    head = group_hosts(listing, "cvs_head")
    assert len(nodes) >= 2
    assert len(head) == 1 and head[0] in nodes
    assert "WARNING" not in stderr and "ERROR" not in stderr, stderr
    for host in nodes:
        assert listing["_meta"]["hostvars"][host]["cvs_orchestrator"] in ("baremetal", "container")


def test_group_vars_beside_the_source_override_the_file(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text((FIXTURES / "baremetal_dict.json").read_text())
    (tmp_path / "src.yml").write_text("plugin: cvs.cluster.cluster_json\npath: cluster.json\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "cvs_nodes.yml").write_text("ansible_user: ops\ncvs_become: false\n")
    listing, _ = run_inventory(tmp_path / "src.yml")
    hostvars = listing["_meta"]["hostvars"]["192.0.2.13"]
    assert hostvars["ansible_user"] == "ops"
    assert hostvars["cvs_become"] is False
    assert hostvars["cvs_vpc_ip"] == "192.0.2.13"


def test_every_example_passes_the_inventory_plugin_and_the_container_filter() -> None:
    """What prepare's first task does with each shipped example: no example may fail there."""
    container_config = ContainerFilters().filters()["container_config"]
    checked = []
    for example in EXAMPLE_FILES:
        listing, stderr = run_inventory(example)
        assert "ERROR" not in stderr, stderr
        for host in group_hosts(listing, "cvs_nodes"):
            hostvars = listing["_meta"]["hostvars"][host]
            if hostvars["cvs_orchestrator"] != "container":
                continue
            normalized = container_config(hostvars["cvs_container"], host=host)
            assert normalize_container(normalized) == normalized
            assert normalized["lifetime"] in ("per_run", "persistent", "no_launch")
            assert {u["name"] for u in normalized["runtime"]["args"]["ulimits"]} >= {"memlock"}
            checked.append((example.name, host))
    assert {name for name, _ in checked} == {
        "container.yml",
        "three-node.yml",
        "legacy-cluster.json",
        "legacy-cluster.yml",
    }


def test_an_unknown_top_level_key_is_refused_naming_the_closest_valid_one() -> None:
    error = error_of(minimal(nodes_dict={}))
    assert error.field == "nodes_dict"
    assert "is not a key of a CVS cluster file; did you mean 'node_dict'?" in str(error)
    assert "_anything" not in str(error_of(minimal(_anything="a comment", usrname="x")))
    assert "did you mean 'username'" in str(error_of(minimal(usrname="x")))
