"""plugins/module_utils/_process.py: a tool's output read as bytes and bounded whatever it holds (NUL bytes, invalid
UTF-8, a line of megabytes without a newline), on this machine's real processes."""

from __future__ import annotations

import time

from ansible_collections.cvs.cluster.plugins.module_utils._process import (
    REPLACEMENT,
    Capture,
    cut_note,
    drain,
    run_command,
    safe_line,
    safe_text,
    start,
)


def test_invalid_bytes_and_control_characters_are_replaced_and_lines_split_before_decoding() -> None:
    text, cut = safe_text(b"ok \xff\xfe line\x00\n\xc3(next\x0bline\xc2\x85\xe2\x80\xa8end\r\n\n")
    assert cut == 0
    assert text.split("\n") == [f"ok {REPLACEMENT * 2} line{REPLACEMENT}", f"{REPLACEMENT}(next{REPLACEMENT}line"
                                f"{REPLACEMENT}{REPLACEMENT}end"]  # fmt: skip
    assert safe_text(b"tab\tand \x1b[32mcolour\x1b[0m")[0] == "tab\tand \x1b[32mcolour\x1b[0m"  # kept as RVS prints
    assert safe_text(b"a\n\n", strip=False)[0] == "a\n\n"


def test_a_long_line_keeps_its_head_and_tail_and_says_how_much_was_cut() -> None:
    line, cut = safe_line(b"A" * 100 + b"\0" * 10_000 + b"Z" * 100, limit=400)
    assert cut == 10_200 - 400
    assert line == "A" * 100 + REPLACEMENT * 100 + f" {cut_note(9800)} " + REPLACEMENT * 100 + "Z" * 100


def test_a_capture_keeps_the_head_and_tail_of_a_stream_and_counts_the_rest() -> None:
    capture = Capture(limit=100)
    for _ in range(1000):
        capture.feed(b"0123456789")
    capture.feed(b"\nlast line")
    assert capture.total == 10_010 and capture.cut == 10_010 - 100
    assert len(capture.head) == 50 and bytes(capture.tail).endswith(b"\nlast line")
    text, cut = capture.text()
    assert cut == capture.cut and f"\n{cut_note(capture.cut)}\n" in text and text.endswith("\nlast line")


def test_fifty_megabytes_of_nul_without_a_newline_come_back_small_and_fast() -> None:
    started = time.monotonic()
    proc = start(["sh", "-c", "head -c 50000000 /dev/zero; echo; echo '[RESULT] done' >&2"])
    out, err = Capture(), Capture()
    assert drain(proc, (out, err), 60) and proc.returncode == 0
    text, cut = out.text()
    assert cut > 49_000_000 and len(text) < 20_000
    assert err.text() == ("[RESULT] done", 0)
    assert time.monotonic() - started < 30


def test_a_command_past_its_deadline_is_killed_and_reported() -> None:
    done = run_command(["sh", "-c", "echo begun; exec sleep 30"], 0.5)
    assert done == {"rc": None, "stdout": "", "stderr": "", "problem": "sh did not answer within 0.5 s"}
    ok = run_command(["printf", "a\\0b\\n"], 10)
    assert ok == {"rc": 0, "stdout": f"a{REPLACEMENT}b\n", "stderr": "", "problem": None}
