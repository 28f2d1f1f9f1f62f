"""amd-smi's static JSON read in one place (plugin_utils/_amd_smi.py), for preflight's facts and RVS's folder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._amd_smi import (
    decode_json,
    gpu_field,
    gpu_items,
    market_names,
    market_names_in_text,
)

GPU = {"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, "driver": {"version": "6.12.12"}}


@pytest.mark.parametrize(
    ("output", "count"),
    [
        (json.dumps([GPU, GPU]), 2),
        (json.dumps({"gpu_data": [GPU, GPU]}), 2),
        (json.dumps({"GPUS": [GPU]}), 1),
        (json.dumps(GPU), 1),
        ("WARNING: partition mode [SPX] [1]\n" + json.dumps([GPU, GPU]), 2),
        ("[]", 0),
    ],
)
def test_every_shape_amd_smi_prints_gives_the_gpus(output: str, count: int) -> None:
    items = gpu_items(output)
    assert items is not None and len(items) == count


@pytest.mark.parametrize("output", ["not json", "", json.dumps({"version": "24.7"}), json.dumps([1, 2]), None])
def test_output_that_is_not_amd_smis_json_is_none(output: Any) -> None:
    assert gpu_items(output) is None


def test_fields_are_read_whatever_their_case() -> None:
    gpu = {"GPU": 0, "ASIC": {"MARKET_NAME": "AMD Instinct MI325X"}}
    assert gpu_field(gpu, "asic", "market_name") == "AMD Instinct MI325X"
    assert gpu_field(gpu, "driver", "version") is None and gpu_field({"asic": "x"}, "asic", "market_name") is None


def test_market_names_from_json_and_from_text() -> None:
    assert market_names(json.dumps([GPU, {"gpu": 1, "market_name": "AMD Instinct MI210"}])) == [
        "AMD Instinct MI300X",
        "AMD Instinct MI210",
    ]
    assert market_names([{"gpu": 0, "bus": {}}]) == []
    assert market_names_in_text("GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI308X\n") == [
        "AMD Instinct MI308X"
    ]


def test_the_first_json_value_accepted_is_taken() -> None:
    text = 'note {"a": 1} then [{"gpu": 0}]'
    assert decode_json(text) == {"a": 1}
    assert decode_json(text, lambda v: isinstance(v, list)) == [{"gpu": 0}]
    assert decode_json("no json") is None and decode_json({"x": 1}) == {"x": 1}
