"""Unit tests of the maxtext role's node checks (roles/maxtext/files/preflight.py): where MaxText keeps its parts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[4] / "roles" / "maxtext" / "files" / "preflight.py"
_SPEC = importlib.util.spec_from_file_location("cvs_maxtext_preflight", _PATH)
assert _SPEC and _SPEC.loader
preflight = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(preflight)


@pytest.mark.parametrize(
    ("train", "expected"),
    [
        # MaxText >= 26.4: a package under src/, configs in src/maxtext/configs
        (
            "/workspace/maxtext/src/maxtext/trainers/pre_train/train.py",
            ("/workspace/maxtext/src/maxtext", "/workspace/maxtext", "/workspace/maxtext/src"),
        ),
        # the same package installed without src/
        ("/opt/mt/maxtext/trainers/pre_train/train.py", ("/opt/mt/maxtext", "/opt/mt", "/opt/mt")),
        # older releases: train.py next to configs/
        (
            "/workspace/maxtext/MaxText/train.py",
            ("/workspace/maxtext/MaxText", "/workspace/maxtext", "/workspace/maxtext"),
        ),
        (
            "/workspace/maxtext/src/MaxText/train.py",
            ("/workspace/maxtext/src/MaxText", "/workspace/maxtext/src", "/workspace/maxtext/src"),
        ),
        # a trainers/pre_train directory that is not MaxText's package keeps the old rule
        (
            "/x/other/trainers/pre_train/train.py",
            ("/x/other/trainers/pre_train", "/x/other/trainers", "/x/other/trainers"),
        ),
    ],
)
def test_layout_of_each_maxtext_generation(train: str, expected: tuple[str, str, str]) -> None:
    assert preflight.maxtext_layout(train) == expected


def test_default_script_list_starts_with_the_26_4_path() -> None:
    import yaml

    defaults = yaml.safe_load((_PATH.parents[1] / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((_PATH.parents[1] / "meta" / "argument_specs.yml").read_text())
    scripts = defaults["maxtext_train_scripts"]
    assert scripts[0] == "/workspace/maxtext/src/maxtext/trainers/pre_train/train.py"
    assert specs["argument_specs"]["main"]["options"]["maxtext_train_scripts"]["default"] == scripts
