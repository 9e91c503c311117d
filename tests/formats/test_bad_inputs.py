"""Bad log inputs, tried deliberately: each one is a clear error or a counted problem naming the file (and
line and field where there is one); nothing is passed over in silence, nothing hangs, nothing expands
without bound."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import zstandard

from promptkit.errors import LogFileError
from promptkit.formats import base, read_logs, stream_logs
from promptkit.formats.base import Source, sniff_format
from tests.formats.test_claude_code import MAIN

LINES = [
    {"request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": f"question {k}"}]}}
    for k in range(400)
]
TEXT = "".join(json.dumps(line) + "\n" for line in LINES).encode()


def _zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# ---------------------------------------------------------------------------------------------------
# compressed streams: verified to their end, bounded


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_truncated_compressed_log_is_an_error_not_a_shorter_log(tmp_path: Path, kind: str) -> None:
    # mutation checked: the zstd reader without its end-of-frame check (the old stream_reader) reads
    # the first part of the file and reports no problem
    big = TEXT * 40  # large enough that the cut falls after the head that sniffing reads
    whole = gzip.compress(big) if kind == "gzip" else _zst(big)
    path = tmp_path / ("calls.jsonl.gz" if kind == "gzip" else "calls.jsonl.zst")
    path.write_bytes(whole[: int(len(whole) * 0.8)])
    with pytest.raises(LogFileError) as err:
        read_logs(path)
    assert err.value.path == str(path)
    assert "ended before" in err.value.reason  # gzip's words and zstd's alike


def test_every_frame_of_a_multi_frame_zstd_log_is_read(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl.zst"
    path.write_bytes(_zst(TEXT) + _zst(TEXT))  # `cat a.zst b.zst`, as zstd allows
    assert len(read_logs(path).records) == 2 * len(LINES)


def test_a_line_longer_than_the_limit_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "digits.jsonl.gz"
    head = b"".join(json.dumps(line).encode() + b"\n" for line in LINES[:3])
    path.write_bytes(gzip.compress(head + b"7" * 50_000 + b"\n"))
    with pytest.raises(
        LogFileError, match=r"line 4: longer than 1000 bytes \(promptkit.formats.base.MAX_LINE_BYTES\)"
    ):
        list(Source(path, "digits.jsonl", "gzip", "").lines())


def test_a_log_that_expands_past_the_limit_stops_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "MAX_DECOMPRESSED_BYTES", 100_000)
    for name, data in (("bomb.jsonl.gz", gzip.compress(TEXT + b"\n" * 500_000)),
                       ("bomb.jsonl.zst", _zst(TEXT + b"\n" * 500_000))):  # fmt: skip
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(LogFileError, match="decompresses to more than 100000 bytes") as err:
            read_logs(path)
        assert err.value.path == str(path)


def test_a_long_run_of_blank_lines_keeps_the_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "gaps.jsonl.gz"
    broken = b'{"request": {"messages": [}\n'  # an invalid line after the run: its number must be right
    head = b"".join(json.dumps(line).encode() + b"\n" for line in LINES[:2])
    path.write_bytes(gzip.compress(head + b"\n" * 3_000_000 + broken + TEXT))
    loaded = read_logs(path)
    [problem] = loaded.problems
    assert problem.line == 2 + 3_000_000 + 1
    assert len(loaded.records) == 2 + len(LINES)


# ---------------------------------------------------------------------------------------------------
# paths that are not regular files


def test_a_named_fifo_is_a_clear_error_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "calls.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            read_logs(fifo)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # the open blocked: unblock it by opening the writing end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("read_logs blocked on a FIFO")
    [exc] = outcome
    assert isinstance(exc, LogFileError) and "is a pipe (FIFO), not a regular file" in str(exc)


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_standard_input_gets_its_own_message(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if name == "/dev/stdin":
        read_end, write_end = os.pipe()
        os.close(write_end)
        saved = os.dup(0)
        os.dup2(read_end, 0)  # standard input is a pipe, as in `cat log | promptkit analyze /dev/stdin`
    try:
        with pytest.raises(LogFileError, match="standard input: reading a log from a pipe is not supported"):
            read_logs(name)
    finally:
        if name == "/dev/stdin":
            os.dup2(saved, 0)
            os.close(saved)
            os.close(read_end)


def test_a_device_is_a_clear_error() -> None:
    with pytest.raises(LogFileError, match="/dev/null: is a character device, not a regular file"):
        read_logs("/dev/null")


def test_every_skipped_path_in_a_folder_is_a_counted_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutations checked: without the problems of find_log_files (the old rglob walk), the dangling
    # symlink, the FIFO and the unreadable folder vanish and the load reports no problem
    folder = tmp_path / "logs"
    (folder / "locked").mkdir(parents=True)
    (folder / "locked" / "hidden.jsonl").write_bytes(TEXT)
    (folder / "good.jsonl").write_bytes(TEXT)
    (folder / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:  # the tests run as root: deny the folder the way chmod 000 would
        if Path(path) == folder / "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for loaded in (read_logs(folder), stream_logs(folder)):
        reasons = {Path(p.file).name: p.reason for p in loaded.problems}
        assert "dangling symlink" in reasons["gone.jsonl"]
        assert "pipe (FIFO)" in reasons["pipe.jsonl"]
        assert "directory cannot be read: Permission denied" in reasons["locked"]
        assert len(loaded.problems) == 3
    assert len(read_logs(folder).records) == len(LINES)


def test_a_named_directory_that_cannot_be_read_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(LogFileError, match=r"locked: directory cannot be read: Permission denied$"):
        read_logs(folder)


def test_a_named_dangling_symlink_says_so(tmp_path: Path) -> None:
    link = tmp_path / "calls.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(LogFileError, match="a dangling symlink"):
        read_logs(link)


# ---------------------------------------------------------------------------------------------------
# formats told apart despite damage; truncated documents named


def test_a_claude_code_transcript_with_a_corrupt_first_line_is_still_claude_code(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(
        '{"parentUuid": null, "sessionId": "s1", "ty\n' + MAIN.read_text(encoding="utf-8"), encoding="utf-8"
    )
    assert sniff_format(Source.open(path)).name == "claude-code"
    loaded = read_logs(path)
    assert loaded.formats == {"claude-code": 1}
    assert [(p.line, p.reason.split(":")[0]) for p in loaded.problems if p.line == 1] == [(1, "invalid JSON")]
    assert len(loaded.records) == len(read_logs(MAIN).records)


@pytest.mark.parametrize("keep", [40, 0.5])
def test_a_truncated_har_is_named_as_such(tmp_path: Path, keep: float) -> None:
    text = (Path(__file__).resolve().parents[2] / "fixtures/http-capture/openai.har").read_text(
        encoding="utf-8"
    )
    path = tmp_path / "cut.har"
    path.write_text(text[: keep if isinstance(keep, int) else int(len(text) * keep)], encoding="utf-8")
    loaded = read_logs(path)
    assert loaded.formats == {"http-capture": 1}
    [problem] = loaded.problems
    assert "the HAR document is truncated" in problem.reason and problem.line is not None


# ---------------------------------------------------------------------------------------------------
# reported usage that cannot be true


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 500}}, "prompt_tokens_details.cached_tokens"),
        ({"prompt_tokens": 10, "prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 7}, "prompt_cache_hit_tokens"),
        ({"input_tokens": 5, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 3, "prompt_tokens": 40},
         "prompt_tokens"),
        ({"prompt_tokens": -3}, "prompt_tokens"),
    ],
    ids=["cached-over-prompt", "deepseek-sum", "anthropic-total", "negative"],
)  # fmt: skip
def test_impossible_usage_is_a_problem_naming_file_line_and_field(
    tmp_path: Path, usage: dict[str, Any], field: str
) -> None:
    # mutation checked: check_usage returning usage unchecked lets cached 500 of 10 through (a 5000% hit)
    path = tmp_path / "calls.jsonl"
    record = {"request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
              "response": {"usage": usage}}  # fmt: skip
    path.write_text(json.dumps(LINES[0]) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    loaded = read_logs(path)
    [problem] = loaded.problems
    assert (problem.file, problem.line) == (str(path), 2)
    assert f"usage.{field}" in problem.reason
    assert all(
        r.usage is None or (r.usage.cached_tokens or 0) <= (r.usage.prompt_tokens or 0)
        for r in loaded.records
    )


def test_a_lone_surrogate_is_named_by_file_line_and_field(tmp_path: Path) -> None:
    from promptkit.analysis import analyze

    path = tmp_path / "calls.jsonl"
    bad = {"request": {"model": "deepseek-chat", "messages": [{"role": "system", "content": "sys"},
                                                             {"role": "user", "content": "x\ud800y"}]}}  # fmt: skip
    path.write_text(json.dumps(LINES[0]) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    result = analyze(path)
    assert result.requests.height == 2  # analyzed, with the surrogate replaced, and said so
    [note] = [n for n in result.notes if "surrogate" in n]
    assert f"{path}:2, request.messages[1].content" in note


def test_a_mended_record_that_cannot_be_tokenized_is_both_noted_and_a_problem() -> None:
    # its lone surrogate was mended before its malformed opaque head stopped it: the note names the
    # one, the problems the other
    from promptkit.analysis import analyze_requests
    from promptkit.layout import RequestRecord

    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "x\ud800y"}]}
    result = analyze_requests(
        [RequestRecord(body, "s", meta={"opaque_head_tokens": -5})], provider="deepseek"
    )
    assert result.requests.height == 0
    [reason] = result.problems["reason"].to_list()
    assert "s#0: cannot tokenize" in reason and "meta.opaque_head_tokens" in reason
    [note] = [n for n in result.notes if "surrogate" in n]
    assert "s#0 (request.messages[0].content)" in note


@pytest.mark.slow
@pytest.mark.parametrize("how", ["read_logs", "stream_logs", "file plan"])
def test_a_file_of_endless_bad_lines_keeps_a_bounded_number_of_problems_and_counts_the_rest(
    tmp_path: Path, how: str
) -> None:
    """A 9.8 KB .gz of 5M one-character lines once held 1.68 GB of problems; now the first
    MAX_PROBLEMS_PER_FILE are kept and one closing problem counts the rest, in every plan."""
    assert base.MAX_PROBLEMS_PER_FILE == 1000
    good = json.dumps({"request": {"messages": [{"role": "user", "content": "hi"}]}, "session": "s"})
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"x\n" * 1100 + good.encode() + b"\n" + b"y\n" * 30)
    if how == "read_logs":
        loaded = read_logs(path)
        records, lines, reasons = (
            len(loaded.records),
            [p.line for p in loaded.problems],
            [p.reason for p in loaded.problems],
        )
    elif how == "stream_logs":
        stream = stream_logs(path)
        records, lines, reasons = (
            stream.records,
            [p.line for p in stream.problems],
            [p.reason for p in stream.problems],
        )
    else:
        from promptkit.analysis import analyze

        result = analyze(path, jobs=2, provider="deepseek")
        records, lines, reasons = (
            result.requests.height,
            result.problems["line"].to_list(),
            result.problems["reason"].to_list(),
        )
    assert records == 1
    assert lines == [*range(1, 1001), 1001]
    assert reasons[-1].startswith(
        "130 more problems like these, lines 1001 to 1131 (not kept one by one past the first 1,000 of this file)"
    )
    assert reasons[-1].endswith("the first of them: invalid JSON: Expecting value (column 1)")


def _chat_line(content: str) -> str:
    return json.dumps({"request": {"messages": [{"role": "user", "content": content}]}, "session": content})


def test_hidden_logs_and_folders_are_not_read_and_a_note_says_so(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(_chat_line("a") + "\n")
    (tmp_path / ".b.jsonl").write_text(_chat_line("b") + "\n")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "c.jsonl").write_text(_chat_line("c") + "\n")
    (tmp_path / ".notes.txt").write_text("not a log")
    loaded = read_logs(tmp_path)
    assert [r.session for r in loaded.records] == ["a"]
    (note,) = [n for n in loaded.notes if "hidden" in n]
    assert note == (
        f"2 hidden log file(s) or folder(s) were not read ({tmp_path / '.cache'}/, {tmp_path / '.b.jsonl'}); "
        "name a file to read it"
    )
    assert stream_logs(tmp_path).notes == list(loaded.notes)
    # named, a hidden log is read
    assert [r.session for r in read_logs(tmp_path / ".b.jsonl").records] == ["b"]


def test_a_directory_of_hidden_logs_only_says_why_it_holds_none(tmp_path: Path) -> None:
    (tmp_path / ".b.jsonl").write_text(_chat_line("b") + "\n")
    with pytest.raises(
        LogFileError, match=r"directory holds no log files .*; hidden entries are not read: .*\.b\.jsonl"
    ):
        read_logs(tmp_path)


@pytest.mark.parametrize("alias", ["same path twice", "symlink", "hard link", "relative path"])
def test_the_same_log_given_twice_is_read_once(
    tmp_path: Path, alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given twice it was counted twice: 56 -> 112 requests, the hit ratio 46.5% -> 72.8%."""
    log = tmp_path / "a.jsonl"
    log.write_text(_chat_line("a") + "\n" + _chat_line("b") + "\n")
    other: Path | str = log
    if alias == "symlink":
        other = tmp_path / "link.jsonl"
        other.symlink_to(log)
    elif alias == "hard link":
        other = tmp_path / "hard.jsonl"
        os.link(log, other)
    elif alias == "relative path":
        monkeypatch.chdir(tmp_path)
        other = "./a.jsonl"
    loaded = read_logs([log, other])
    assert len(loaded.records) == 2
    (problem,) = loaded.problems
    assert (
        problem.file == str(Path(other))
        and problem.reason == f"the same file as {log} (given twice, or through a link); read once"
    )
    assert stream_logs([log, other]).records == 2


def test_a_directory_and_a_file_in_it_are_read_once(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text(_chat_line("a") + "\n")
    loaded = read_logs([tmp_path, log])
    assert len(loaded.records) == 1 and len(loaded.problems) == 1


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("not a date", "'not a date' is neither seconds nor an ISO 8601 time"),
        (-5, "-5 is not a time between 1970 and 2200"),
        (1e20, "1e+20 is not a time between 1970 and 2200"),
        ("10000-01-01T00:00:00Z", "'10000-01-01T00:00:00Z' is neither seconds nor an ISO 8601 time"),
    ],
)
def test_a_har_time_that_cannot_be_read_is_a_problem_and_the_record_is_kept(
    tmp_path: Path, value: object, reason: str
) -> None:
    har = json.loads((Path(__file__).parents[2] / "fixtures/http-capture/openai.har").read_text())
    har["log"]["entries"][1]["startedDateTime"] = value
    path = tmp_path / "bad.har"
    path.write_text(json.dumps(har, indent=1))
    loaded = read_logs(path)
    assert len(loaded.records) == 3  # kept
    assert sorted(r.timestamp is None for r in loaded.records) == [False, False, True]
    (problem,) = [p for p in loaded.problems if "startedDateTime" in p.reason]
    assert problem.reason == f"log.entries[1].startedDateTime: {reason}; the record is kept without its time"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-5, "-5 is not a time between 1970 and 2200"),
        (1e20, "1e+20 is not a time between 1970 and 2200"),
        (
            1775786375000,
            "1775786375000 is not a time between 1970 and 2200 (milliseconds? a time in seconds is expected)",
        ),
        (253402300800, "253402300800 is not a time between 1970 and 2200"),  # the year 10000
    ],
)
def test_a_time_outside_1970_to_2200_is_a_problem(tmp_path: Path, value: object, reason: str) -> None:
    line = {"request": {"messages": [{"role": "user", "content": "hi"}]}, "session": "s", "timestamp": value}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(line) + "\n")
    loaded = read_logs(path)
    assert [r.timestamp for r in loaded.records] == [None]
    (problem,) = loaded.problems
    assert problem.line == 1 and reason in problem.reason


def test_a_log_rewritten_between_the_passes_of_stream_is_an_error_even_with_as_many_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(_chat_line("a") + "\n" + _chat_line("b") + "\n")
    stream = stream_logs(path)
    assert stream.records == 2
    path.write_text(_chat_line("c") + "\n" + _chat_line("d") + "\n" + " " * 3)  # as many records, rewritten
    with pytest.raises(LogFileError, match=r"a\.jsonl: changed while it was analyzed .* --stream"):
        list(stream.sessions())
    untouched = tmp_path / "b.jsonl"
    untouched.write_text(_chat_line("e") + "\n")
    assert [len(s) for s in stream_logs(untouched).sessions()] == [1]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_lone_surrogate_in_a_session_id_model_or_layout_key_is_mended_not_fatal(
    tmp_path: Path, jobs: str
) -> None:
    """One such id once aborted the whole run ('surrogates not allowed'); now each is a problem naming
    the line and field, U+FFFD in its place, and every other record is analyzed."""
    import io

    from promptkit import cli

    rows = [
        {"request": {"model": "deepseek-chat\ud800", "messages": [{"role": "user", "content": "hi"}]}, "session": "s1"},
        {"request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}, "session": "s\ud800x"},
        {"request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}, "session": "s3",
         "layout": [{"slot": "current", "key": "k\udfff"}]},
        {"request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "fine"}]}, "session": "s4"},
    ]  # fmt: skip
    log = tmp_path / "sur.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    args = [
        "analyze",
        str(log),
        "--provider",
        "deepseek",
        "--out",
        str(tmp_path / "o"),
        "--no-plots",
        "--no-html",
    ]
    assert cli.main([*args, "--jobs", jobs], stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    for line, field in ((1, "request.model"), (2, "session"), (3, "layout")):
        assert f"sur.jsonl:{line}: {field}: a lone UTF-16 surrogate replaced by U+FFFD" in text
    csv = (tmp_path / "o" / "requests.csv").read_text(encoding="utf-8")
    assert "s\ufffdx" in csv and csv.count("\n") == 5  # every record analyzed
