"""Unit tests for plugin_utils/_quarantine/reason.py: the cvs: drain reason and who owns a drain."""

from __future__ import annotations

import pytest

from ansible_collections.cvs.cluster.plugins.plugin_utils._quarantine.reason import (
    SLURM_REASON_LIMIT,
    make_reason,
    owned,
    plain,
)


def test_a_reason_names_the_check_the_cause_and_the_run() -> None:
    assert make_reason("rvs", "test gst_single FAIL", "20261207-220000-abcdef") == (
        "cvs: rvs: test gst_single FAIL (run 20261207-220000-abcdef)"
    )


def test_a_long_reason_is_cut_keeping_the_prefix_and_the_run_id_and_lines_become_one() -> None:
    reason = make_reason("rvs", "gst_single: GPU 2 met: FALSE\n" * 40, "20261207-220000-abcdef", 100)
    assert 95 <= len(reason) <= 100 and "\n" not in reason
    assert reason.startswith("cvs: rvs: gst_single: GPU 2 met: FALSE gst_single")
    assert reason.endswith("... (run 20261207-220000-abcdef)")


def test_a_limit_too_small_or_above_slurms_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="the reason limit 20 cannot hold 'cvs: rvs: ' and"):
        make_reason("rvs", "x", "20261207-220000-abcdef", 20)
    with pytest.raises(ValueError, match=f"longer than Slurm accepts \\({SLURM_REASON_LIMIT}\\)"):
        make_reason("rvs", "x", "r", 5000)


@pytest.mark.parametrize(
    ("shown", "mine", "health"),
    [
        ("cvs: rvs: test mem FAIL (run r1) [root@2026-12-07T02:03:30]", True, False),
        ("cvs: health: rvs_version is 1.1.0, baseline 1.3.0 [slurm@2026-12-07T02:03:30]", True, True),
        ("bad fan test [root@2026-12-07T02:03:30]", False, False),
        ("NHC: check_fs_mount: /scratch not mounted", False, False),
        ("(null)", False, False),
        ("", False, False),
        (" cvs:x", True, False),
    ],
)
def test_only_a_reason_that_starts_with_cvs_is_ours(shown: str, mine: bool, health: bool) -> None:
    assert owned(shown) is mine
    assert owned(shown, "cvs: health:") is health


def test_plain_drops_the_user_and_time_slurm_adds() -> None:
    assert plain("bad fan [root@2026-12-07T02:03:30]") == "bad fan"
    assert plain("a [b] c") == "a [b] c"
    assert plain("(null)") == ""
