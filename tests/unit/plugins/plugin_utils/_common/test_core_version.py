"""The tested ansible-core range and the warning a run outside it starts with (_common/core_version.py)."""

from __future__ import annotations

import pytest
from ansible.release import __version__ as running

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.core_version import (
    TESTED_ANSIBLE_CORE,
    core_release,
    untested_core_message,
    warn_if_untested_core,
)


class RecordingDisplay:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)


def test_the_range_is_2_19_to_2_21() -> None:
    assert TESTED_ANSIBLE_CORE == ((2, 19), (2, 21))


@pytest.mark.parametrize(
    ("version", "release"),
    [("2.19.14", (2, 19)), ("2.21.0rc1", (2, 21)), ("2.22.0.dev0", (2, 22)), (" 2.20.1 ", (2, 20)), ("devel", None)],
)
def test_core_release(version: str, release: tuple[int, int] | None) -> None:
    assert core_release(version) == release


@pytest.mark.parametrize("version", ["2.19.0", "2.19.14", "2.20.3", "2.21.0b2", "2.21.9"])
def test_a_tested_release_gets_no_message(version: str) -> None:
    assert untested_core_message(version) is None


@pytest.mark.parametrize("version", ["2.17.0", "2.18.12", "2.22.0", "2.22.0.dev0", "3.0.0", "1.9.6", "devel"])
def test_an_untested_release_is_named_with_the_range(version: str) -> None:
    assert untested_core_message(version) == (
        f"cvs.cluster is tested with ansible-core 2.19 to 2.21, and this is ansible-core {version}: an error in this "
        "run may come from that. Install a tested release (pip install 'ansible-core>=2.19,<2.22')."
    )


def test_the_message_follows_the_range() -> None:
    message = untested_core_message("2.19.1", tested=((2, 20), (2, 22)))
    assert message is not None
    assert "ansible-core 2.20 to 2.22, and this is ansible-core 2.19.1" in message
    assert "'ansible-core>=2.20,<2.23'" in message


def test_warn_if_untested_core_warns_only_outside_the_range() -> None:
    display = RecordingDisplay()
    assert warn_if_untested_core(display, "2.19.14") is None
    assert display.warnings == []
    message = warn_if_untested_core(display, "2.18.1")
    assert display.warnings == [message] and "ansible-core 2.18.1" in str(message)


def test_the_running_core_is_a_tested_one() -> None:
    """The unit tests run on a tested release, and the default is the running one: no warning."""
    display = RecordingDisplay()
    assert warn_if_untested_core(display) is None, running
    assert display.warnings == []
