# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An upstream CVS JAX MaxText training config (given with ``-e @file``), mapped onto the maxtext role's variables.

Upstream ships two layouts: the ``training`` block (``schema_version``/``framework: jaxmaxtext``, sweeps as a list
with ``enabled_sweep_list``) and the ``train_params`` layout (``gpus_per_node``, ``container.env``,
``train_params.maxtext_config``, sweeps as ``{key: overrides}`` with ``runs``). Every key is honoured with
upstream's meaning, ignored with the reason (labels; what upstream's own installer or downloader reads), or
refused naming its key path and what to do instead. Keys starting with ``_`` are comments, as upstream reads them.

One playbook run trains one sweep: the only enabled one, or the one ``maxtext_sweep`` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterator, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest

# the top-level variables an upstream file sets (its comments, `_...`, are not collected)
TOP_KEYS = (
    "schema_version", "framework", "gpu_arch", "gpu_name", "enforce_thresholds", "threshold_json", "gpus_per_node",
    "paths", "model", "container", "training", "train_params", "scaling_baseline", "convergence", "loss_curve",
    "smoke", "checkpoint_resume", "error_patterns", "sweeps", "runs",
)  # fmt: skip
LABELS = {
    "gpu_arch": "a label of the run upstream; the report names each node's GPUs",
    "gpu_name": "a label of the run upstream; the report names each node's GPUs",
    "model": "labels of the run upstream (id, remote, precision); the model is maxtext_config.model_name",
    "distributed": "the role trains across every node of the play: distributed when there is more than one",
    "verify_dmesg": "dmesg is not read by this role",
    "nic_type": "selects upstream's backup copy of the RDMA provider library; mount it into the container instead",
    "rdma_lib": "upstream's backup copy of the RDMA provider library; mount it into the container instead",
    "hf_model_id": "upstream downloads the tokenizer from it; this role downloads nothing (synthetic data needs "
    "none; else put the tokenizer at tokenizer_path)",
    "threshold_json": "a file name next to the config, which -e @file does not tell; give the file as "
    "maxtext_thresholds (docs/migrating.md)",
}
PATH_KEYS = {
    "shared_fs": "used by the {shared_fs} and {paths.*} references of the file",
    "models_dir": "used by the {paths.models_dir} references of the file",
    "log_dir": "the run's logs are kept in its run directory and copied into the results",
    "hf_token_file": "this role downloads nothing",
    "temp_dir": "the run's files are in its run directory under cvs_scratch_root",
}
# keys of maxtext_config the role sets itself
ROLE_SET = {"run_name": "the run's tag", "base_output_directory": "the run directory's output/"}
_PLACEHOLDER = re.compile(r"<changeme>|\{user-id\}|\{[^{}]*\|[^{}]*\}", re.IGNORECASE)
_REFERENCE = re.compile(r"\{(shared_fs|paths\.[A-Za-z_]+)\}")
_FP8 = {"mi300x": "nanoo_fp8", "mi325x": "nanoo_fp8", "mi350x": "fp8", "mi355x": "fp8"}


class MaxtextConfigError(ValueError):
    """A key of the upstream file that cannot be honoured; the message names its key path."""


def is_upstream(variables: Mapping[str, Any]) -> bool:
    """Whether these top-level variables are an upstream MaxText config (not just a variable named `container`)."""
    for block in ("training", "train_params"):
        if isinstance(variables.get(block), Mapping) and isinstance(variables[block].get("maxtext_config"), Mapping):
            return True
    return str(variables.get("framework", "")).lower() in ("jaxmaxtext", "jax-maxtext")


class _Mapper:
    def __init__(self, variables: Mapping[str, Any], user: str, sweep: str, container: Mapping[str, Any]) -> None:
        self.vars = variables
        self.user = user
        self.sweep = sweep
        self.container = container
        self.settings: dict[str, Any] = {}
        self.ignored: list[str] = []
        self.overrides: dict[str, Any] = {}
        self.env: dict[str, str] = {}
        paths = variables.get("paths") or {}
        self.paths = dict(paths) if isinstance(paths, Mapping) else {}

    # ---- values ------------------------------------------------------------------------------------------------

    def text(self, value: Any, where: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise MaxtextConfigError(f"{where}: expected a string, got {type(value).__name__}")
        text = str(value)
        for _attempt in range(5):  # {paths.models_dir} may refer to {shared_fs}
            text = _REFERENCE.sub(self._resolve, text)
        if self.user:
            text = text.replace("{user-id}", self.user)
        found = _PLACEHOLDER.search(text)
        if found:
            raise MaxtextConfigError(f"{where}: still holds the placeholder {found.group(0)!r}; set a real value")
        return text

    def _resolve(self, match: re.Match) -> str:
        name = match.group(1).removeprefix("paths.")
        if name not in self.paths:
            raise MaxtextConfigError(f"{{{match.group(1)}}}: paths.{name} is not set in the file")
        return str(self.paths[name])

    def value(self, value: Any, where: str) -> Any:
        """A maxtext_config value: strings resolved and checked, the rest as given."""
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, Mapping):
            return {k: self.value(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def integer(self, value: Any, where: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"\s*-?\d+\s*", str(value)):
            raise MaxtextConfigError(f"{where}: expected an integer, got {value!r}")
        if int(value) < minimum:
            raise MaxtextConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
        return int(value)

    def block(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise MaxtextConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return value

    def entries(self, block: Mapping[str, Any], where: str, known: Any) -> Iterator[tuple[str, Any, str]]:
        """``(key, value, key path)`` of a block's keys, comments (``_...``) skipped, an unknown key refused."""
        for key, value in block.items():
            if str(key).startswith("_"):
                continue
            if key not in known:
                raise self.unknown(str(key), f"{where}.{key}", known)
            yield str(key), value, f"{where}.{key}"

    def unknown(self, key: str, where: str, valid: Any) -> MaxtextConfigError:
        return MaxtextConfigError(f"{where}: unknown key{closest(key, sorted(valid))}")

    # ---- blocks -----------------------------------------------------------------------------------------------

    def top(self) -> None:
        if "schema_version" in self.vars and str(self.vars["schema_version"]) != "1":
            raise MaxtextConfigError(f"schema_version: {self.vars['schema_version']!r} is not 1, the schema this maps")
        if "framework" in self.vars and str(self.vars["framework"]).lower() not in ("jaxmaxtext", "jax-maxtext"):
            raise MaxtextConfigError(f"framework: {self.vars['framework']!r} is not jaxmaxtext")
        for key in ("gpu_arch", "gpu_name", "model", "threshold_json"):
            if key in self.vars:
                self.ignored.append(f"{key}: {LABELS[key]}")
        for key in self.block(self.vars.get("paths", {}), "paths"):
            if str(key).startswith("_"):
                continue
            if key not in PATH_KEYS:
                raise self.unknown(str(key), f"paths.{key}", PATH_KEYS)
            self.ignored.append(f"paths.{key}: {PATH_KEYS[key]}")
        if "gpus_per_node" in self.vars:
            self.settings["maxtext_gpus_per_node"] = self.integer(self.vars["gpus_per_node"], "gpus_per_node", 0)
        self.thresholds()
        if "container" in self.vars:
            self.container_block(self.block(self.vars["container"], "container"))
        for key in ("scaling_baseline", "convergence", "loss_curve", "smoke", "checkpoint_resume", "error_patterns"):
            if key in self.vars:
                getattr(self, key)(self.vars[key], key)

    def thresholds(self) -> None:
        if "enforce_thresholds" not in self.vars:
            return
        enforce = self.vars["enforce_thresholds"]
        if not isinstance(enforce, bool):
            raise MaxtextConfigError(f"enforce_thresholds: expected true or false, got {enforce!r}")
        if not enforce:
            # upstream records the metrics without judging them: so does an empty maxtext_thresholds
            self.settings["maxtext_thresholds"] = {}
            self.ignored.append("enforce_thresholds: false: metrics are recorded, not judged (maxtext_thresholds {})")
        elif not self.vars.get("maxtext_thresholds"):
            name = self.vars.get("threshold_json") or "<threshold file>"
            raise MaxtextConfigError(
                f"enforce_thresholds: true, but no thresholds were given: add -e "
                f'\'{{"maxtext_thresholds": "{{{{ lookup(\\"file\\", \\"{name}\\") | from_json }}}}"}}\''
            )

    def container_block(self, block: Mapping[str, Any]) -> None:
        for key, value in block.items():
            if str(key).startswith("_"):
                continue
            if key == "env":
                for name, item in self.block(value, "container.env").items():
                    self.env[str(name)] = self.text(item, f"container.env.{name}")
            elif key == "image":
                image = self.text(value, "container.image")
                mine = str(self.container.get("image") or "")
                if mine and image != mine:
                    raise MaxtextConfigError(
                        f"container.image: {image!r} is not the inventory's cvs_container.image {mine!r}: one "
                        "container serves every check of a run; set the image in the inventory (the cluster file's "
                        "container block), or remove container from this file"
                    )
                if not mine:
                    raise MaxtextConfigError(
                        "container: this file asks for a container, the inventory runs on baremetal; set "
                        "cvs_orchestrator: container and cvs_container (the cluster file's container block), or "
                        "remove container from this file"
                    )
            else:
                self.ignored.append(f"container.{key}: the inventory's cvs_container decides it")

    def scaling_baseline(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        for key in block:
            if not str(key).startswith("_") and key not in ("tokens_per_sec_total", "num_nodes"):
                raise self.unknown(str(key), f"{where}.{key}", ("tokens_per_sec_total", "num_nodes"))
        self.settings["maxtext_scaling_baseline"] = {k: v for k, v in block.items() if not str(k).startswith("_")}

    def _off_or_refused(self, where: str, off: bool, how: str, what: str) -> None:
        if not off:
            raise MaxtextConfigError(f"{where}: {what} has no equivalent in this collection yet; {how}")
        self.ignored.append(f"{where}: off")

    def convergence(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        target = block.get("target_value", 0)
        off = isinstance(target, (int, float)) and not isinstance(target, bool) and target <= 0
        self._off_or_refused(where, off, "set convergence.target_value to 0 (record-only) or remove it",
                             "time-to-target loss")  # fmt: skip

    def loss_curve(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        how = "set loss_curve.enforce to false or remove it (the metric loss_decreased can be thresholded instead)"
        self._off_or_refused(where, block.get("enforce") is False, how, "the loss-curve slope check")

    def smoke(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        if block.get("enabled", True) is not False:
            self.ignored.append(f"{where}: the short smoke run before the sweep is not made; the sweep itself stops "
                                "at its first error signature")  # fmt: skip
        else:
            self.ignored.append(f"{where}: off")

    def checkpoint_resume(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        self._off_or_refused(where, block.get("enabled") is False, "set checkpoint_resume.enabled to false or "
                             "remove it", "checkpoint save and resume")  # fmt: skip

    def error_patterns(self, value: Any, where: str) -> None:
        block = self.block(value, where)
        patterns = {}
        for name, regex in block.items():
            if str(name).startswith("_"):
                continue
            text = self.text(regex, f"{where}.{name}")
            try:
                re.compile(text)
            except re.error as exc:
                raise MaxtextConfigError(f"{where}.{name}: invalid regex {text!r}: {exc}") from exc
            patterns[str(name)] = text
        self.settings["maxtext_error_patterns_extra"] = patterns

    def maxtext_config(self, block: Mapping[str, Any], where: str) -> None:
        for key, value in block.items():
            path = f"{where}.{key}"
            if str(key).startswith("_"):
                raise MaxtextConfigError(f"{path}: comment keys inside maxtext_config reach MaxText's YAML, which "
                                         "refuses unknown keys; move the comment up a level")  # fmt: skip
            if key in ROLE_SET:
                raise MaxtextConfigError(f"{path}: set by the role ({ROLE_SET[key]}); remove it")
            if key == "model_name":
                self.settings["maxtext_model_name"] = self.text(value, path)
            elif key == "steps":
                self.settings["maxtext_steps"] = self.integer(value, path, 1)
            elif key == "dataset_type":
                self.settings["maxtext_dataset_type"] = self.text(value, path)
            elif key == "tokenizer_path":
                self.settings["maxtext_tokenizer_path"] = self.text(value, path)
            elif key == "hardware":
                self.ignored.append(
                    f"{path}: the role sets gpu (MaxText's GPU-cluster interface: one process per node, "
                    "JAX_COORDINATOR_IP/PORT, NNODES, NODE_RANK)"
                )
            elif key == "base_config":
                if self.text(value, path) != "base.yml":
                    raise MaxtextConfigError(f"{path}: only base.yml (MaxText's own) is mapped; set "
                                             "maxtext_base_config to the file's path instead")  # fmt: skip
            elif key == "enable_checkpointing":
                if value is not False:
                    raise MaxtextConfigError(f"{path}: checkpointing is off in every run of this role; set it false")
            else:
                self.overrides[str(key)] = self.value(value, path)

    def xla_flags(self, value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            flags = [f"--{str(k).lstrip('-')}={self.text(v, f'{where}.{k}') if v != '' else ''}"
                     for k, v in value.items() if not str(k).startswith("_")]  # fmt: skip
        elif isinstance(value, list):
            flags = [self.text(v, f"{where}[{i}]") for i, v in enumerate(value)]
        else:
            flags = self.text(value, where).split()
        self.settings["maxtext_xla_flags"] = flags

    def train_scripts(self, value: Any, where: str) -> None:
        scripts = value if isinstance(value, list) else [value]
        self.settings["maxtext_train_scripts"] = [self.text(s, f"{where}[{i}]") for i, s in enumerate(scripts)]

    # ---- layouts ----------------------------------------------------------------------------------------------

    TRAINING_KEYS = (
        "distributed", "gpus_per_node", "verify_dmesg", "steps", "enable_checkpointing", "train_script_paths",
        "train_script", "maxtext_config", "tokenizer", "nic_type", "rdma_lib", "env_vars", "xla_flags", "nccl",
        "jax_distributed", "scaling_baseline", "convergence", "loss_curve", "smoke", "checkpoint_resume",
        "error_patterns", "sweeps", "enabled_sweep_list",
    )  # fmt: skip

    def training(self, block: Mapping[str, Any]) -> None:
        for key, value, where in self.entries(block, "training", self.TRAINING_KEYS):
            if key in LABELS:
                self.ignored.append(f"{where}: {LABELS[key]}")
            elif key == "gpus_per_node":
                self.settings["maxtext_gpus_per_node"] = self.integer(value, where, 0)
            elif key == "steps":
                self.settings["maxtext_steps"] = self.integer(value, where, 1)
            elif key == "enable_checkpointing":
                if value is not False:
                    raise MaxtextConfigError(f"{where}: checkpointing is off in every run of this role; set it false")
            elif key in ("train_script_paths", "train_script"):
                self.train_scripts(value, where)
            elif key == "maxtext_config":
                self.maxtext_config(self.block(value, where), where)
            elif key == "tokenizer":
                for sub, item in self.block(value, where).items():
                    if sub == "tokenizer_path":
                        self.settings["maxtext_tokenizer_path"] = self.text(item, f"{where}.{sub}")
                    elif sub == "hf_model_id":
                        self.ignored.append(f"{where}.{sub}: {LABELS['hf_model_id']}")
                    elif not str(sub).startswith("_"):
                        raise self.unknown(str(sub), f"{where}.{sub}", ("hf_model_id", "tokenizer_path"))
            elif key == "env_vars":
                for name, item in self.block(value, where).items():
                    self.env[str(name)] = self.text(item, f"{where}.{name}")
            elif key == "xla_flags":
                self.xla_flags(value, where)
            elif key == "nccl":
                self.nccl(self.block(value, where), where)
            elif key == "jax_distributed":
                self.jax_distributed(self.block(value, where), where)
            elif key in ("sweeps", "enabled_sweep_list"):
                continue  # chosen below, with the other layout's
            else:
                getattr(self, key)(value, where)

    def nccl(self, block: Mapping[str, Any], where: str) -> None:
        known = ("ib_hca", "ib_hca_list", "socket_ifname", "gloo_socket_ifname", "ib_gid_index")
        for key, value, path in self.entries(block, where, known):
            if key in ("ib_hca", "ib_hca_list"):
                hcas = value if isinstance(value, list) else [value]
                self.settings["maxtext_ib_hcas"] = ",".join(self.text(h, path) for h in hcas)
            elif key == "socket_ifname":
                self.settings["maxtext_network_interface"] = self.text(value, path)
            elif key == "gloo_socket_ifname":
                self.env["GLOO_SOCKET_IFNAME"] = self.text(value, path)
            else:
                self.settings["maxtext_ib_gid_index"] = self.text(value, path)

    def jax_distributed(self, block: Mapping[str, Any], where: str) -> None:
        env_of = {
            "initialization_timeout": "JAX_DISTRIBUTED_INITIALIZATION_TIMEOUT_SECONDS",
            "heartbeat_timeout": "JAX_DISTRIBUTED_HEARTBEAT_TIMEOUT_SECONDS",
        }
        known = ("coordinator_ip", "coordinator_port", *env_of)
        for key, value, path in self.entries(block, where, known):
            if key == "coordinator_ip":
                address = self.text(value, path)
                if address != "auto":
                    self.settings["maxtext_coordinator_address"] = address
            elif key == "coordinator_port":
                self.settings["maxtext_coordinator_port"] = self.integer(value, path, 1)
            else:
                self.env[env_of[key]] = str(self.integer(value, path, 1))

    TRAIN_PARAMS_KEYS = ("hf_model_id", "train_script_paths", "train_script", "maxtext_config", "xla_flags")

    def train_params(self, block: Mapping[str, Any]) -> None:
        for key, value, where in self.entries(block, "train_params", self.TRAIN_PARAMS_KEYS):
            if key == "hf_model_id":
                self.ignored.append(f"{where}: {LABELS['hf_model_id']}")
            elif key in ("train_script_paths", "train_script"):
                self.train_scripts(value, where)
            elif key == "maxtext_config":
                self.maxtext_config(self.block(value, where), where)
            else:
                self.xla_flags(value, where)

    # ---- the sweep ---------------------------------------------------------------------------------------------

    def choose_sweep(self) -> None:
        training = self.vars.get("training") if isinstance(self.vars.get("training"), Mapping) else {}
        sweeps: dict[str, Mapping[str, Any]] = {}
        enabled: Optional[list[str]] = None
        if "sweeps" in training:
            for i, item in enumerate(training["sweeps"] or []):
                entry = self.block(item, f"training.sweeps[{i}]")
                if "name" not in entry:
                    raise MaxtextConfigError(f"training.sweeps[{i}]: a sweep needs a name (its threshold cell)")
                extra = set(entry) - {"name", "maxtext_overrides"} - {k for k in entry if str(k).startswith("_")}
                if extra:
                    raise self.unknown(sorted(extra)[0], f"training.sweeps[{i}].{sorted(extra)[0]}",
                                       ("name", "maxtext_overrides"))  # fmt: skip
                sweeps[str(entry["name"])] = self.block(entry.get("maxtext_overrides", {}), f"training.sweeps[{i}]")
            if "enabled_sweep_list" in training:
                enabled = [str(s) for s in training["enabled_sweep_list"] or []]
        if "sweeps" in self.vars:
            for name, overrides in self.block(self.vars["sweeps"], "sweeps").items():
                if not str(name).startswith("_"):
                    sweeps[str(name)] = self.key_overrides(str(name), self.block(overrides, f"sweeps.{name}"))
            if "runs" in self.vars:
                enabled = [str(s) for s in self.vars["runs"] or []]
        if not sweeps:
            return
        chosen = enabled if enabled is not None else list(sweeps)
        for name in chosen:
            if name not in sweeps:
                raise MaxtextConfigError(f"sweep {name!r} is enabled but not defined (sweeps: {', '.join(sweeps)})")
        if self.sweep:
            if self.sweep not in sweeps:
                raise self.unknown(self.sweep, "maxtext_sweep", sweeps)
            name = self.sweep
        elif len(chosen) == 1:
            name = chosen[0]
        else:
            raise MaxtextConfigError(
                f"the file enables {len(chosen)} sweeps ({', '.join(chosen)}); each is a full training run and one "
                "playbook run trains one: choose it with -e maxtext_sweep=<name>"
            )
        # a sweep's overrides win over maxtext_config's
        self.maxtext_config({k: v for k, v in sweeps[name].items() if not str(k).startswith("_")}, f"sweep {name!r}")
        # the run's name allows letters, digits, '.', '_', '-'; the threshold cell keeps the sweep's own name
        self.settings["maxtext_sweep_name"] = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:64] or "sweep"
        self.settings["maxtext_threshold_cell"] = name

    def key_overrides(self, key: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        """The maxtext_config overrides a sweep key of the train_params layout stands for (BS=, PRECISION=, SL=)."""
        out: dict[str, Any] = {}
        for part in key.split(","):
            name, _sep, value = part.partition("=")
            name, value = name.strip().upper(), value.strip()
            if name == "BS":
                out["per_device_batch_size"] = self.integer(value, f"sweeps.{key} BS", 1)
            elif name == "SL":
                out["max_target_length"] = self.integer(value, f"sweeps.{key} SL", 1)
            elif name == "PRECISION" and value.upper() == "BF16":
                out["quantization"] = ""
            elif name == "PRECISION" and value.upper() == "FP8":
                arch = str(self.vars.get("gpu_arch") or self.vars.get("gpu_name") or "").lower()
                if "quantization" not in extra and arch not in _FP8:
                    raise MaxtextConfigError(
                        f"sweeps.{key}: PRECISION=FP8 needs the GPU's FP8 recipe, which {arch or 'the file'!r} does "
                        'not tell: add "quantization": "nanoo_fp8" (MI300X, MI325X) or "fp8" (MI350X, MI355X) to '
                        "the sweep"
                    )
                out["quantization"] = _FP8.get(arch, "")
            elif name in ("NNODES", "STEPS", "GBS", "BATCH", "SEQLEN") or name == "PRECISION":
                continue  # labels of the threshold cell
            else:
                raise MaxtextConfigError(f"sweeps.{key}: {name}= is not a sweep-key field (BS, PRECISION, SL)")
        return {**out, **extra}


def map_config(
    variables: Mapping[str, Any],
    user: str = "",
    sweep: str = "",
    container: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """``{settings: {maxtext_var: value}, ignored: ["key: why"]}`` for an upstream config's top-level variables.

    ``user`` replaces ``{user-id}``; ``sweep`` chooses the sweep; ``container`` is the inventory's normalised
    ``cvs_container`` ({} on baremetal). Raises MaxtextConfigError naming the key path of what cannot be honoured.
    """
    mapper = _Mapper(variables, user, sweep, container or {})
    for key in variables:
        if key not in TOP_KEYS and key != "maxtext_thresholds":
            raise mapper.unknown(str(key), str(key), TOP_KEYS)
    mapper.top()
    if isinstance(variables.get("training"), Mapping):
        mapper.training(variables["training"])
    if isinstance(variables.get("train_params"), Mapping):
        mapper.train_params(variables["train_params"])
    mapper.choose_sweep()
    if mapper.overrides:
        mapper.settings["maxtext_config_overrides"] = mapper.overrides
    if mapper.env:
        mapper.settings["maxtext_env"] = mapper.env
    return {"settings": mapper.settings, "ignored": mapper.ignored}
