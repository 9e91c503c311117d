"""promptkit.formats: sniffing, compression, session ordering across files, provider inference, notes."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from promptkit.analysis import analyze, analyze_requests
from promptkit.errors import LogFileError, PromptkitError
from promptkit.formats import available_formats, read_logs

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def _lines(*objs: object) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_compressed_logs_read_transparently(tmp_path: Path, suffix: str) -> None:
    raw = _lines(
        {"request": BODY, "session": "s", "timestamp": 1}, {"request": BODY, "session": "s", "timestamp": 2}
    )
    data = {"": raw, ".gz": gzip.compress(raw), ".zst": zstandard.ZstdCompressor().compress(raw)}[suffix]
    path = tmp_path / f"calls.jsonl{suffix}"
    path.write_bytes(data)
    result = read_logs(path)
    assert [(r.session, r.index, r.line, r.provider) for r in result.records] == [
        ("s", 0, 1, "openai"), ("s", 1, 2, "openai"),
    ]  # fmt: skip
    assert result.formats == {"promptkit": 1}
    # a directory search finds compressed files too, and the default session drops both suffixes
    (tmp_path / "bare.jsonl.gz").write_bytes(gzip.compress(_lines(BODY)))
    sessions = {r.session for r in read_logs(tmp_path).records}
    assert "bare" in sessions


def test_a_file_of_no_known_format_is_one_error_naming_the_formats_tried(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('"just a string"', encoding="utf-8")
    with pytest.raises(LogFileError) as info:
        read_logs(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "not a log of any known format" in message
    for name in available_formats():
        assert name in message
    # found in a directory instead, the same file is a counted problem and the rest is read
    (tmp_path / "ok.jsonl").write_bytes(_lines(BODY))
    result = read_logs(tmp_path)
    assert len(result.records) == 1
    assert [(p.file, p.line) for p in result.problems] == [(str(path), None)]


def test_unknown_format_name_is_a_promptkit_error(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(_lines(BODY))
    with pytest.raises(PromptkitError, match="unknown log format 'nope'; known: "):
        read_logs(tmp_path, format="nope")


def test_a_session_split_across_files_is_merged_in_time_order_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(_lines({"request": BODY, "session": "s", "timestamp": 30}))
    (tmp_path / "b.jsonl").write_bytes(
        _lines(
            {"request": BODY, "session": "s", "timestamp": 10},
            {"request": BODY, "session": "s", "timestamp": 20},
        )
    )
    result = read_logs(tmp_path)
    assert [(Path(r.file or "").name, r.timestamp, r.index) for r in result.records] == [
        ("b.jsonl", 10, 0), ("b.jsonl", 20, 1), ("a.jsonl", 30, 2),
    ]  # fmt: skip
    assert any("spans 2 files" in n for n in result.notes)
    assert any("not in time order" in n for n in result.notes)


def test_an_empty_file_is_a_counted_problem(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    result = read_logs(path)
    assert result.records == () and [p.reason for p in result.problems] == [
        "no requests in this promptkit log"
    ]
    # the analysis carries it: 0 rows, 1 problem, nothing silent
    analyzed = analyze(path)
    assert analyzed.requests.height == 0 and analyzed.problems.height == 1


def test_the_provider_is_inferred_per_session_and_a_default_is_noted(tmp_path: Path) -> None:
    claude = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    mystery = {"model": "my-local-model", "messages": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        _lines(
            {"request": BODY, "session": "o"},
            {"request": claude, "session": "a"},
            {"request": mystery, "session": "m"},
        )
    )
    result = analyze(path, provider=None)
    by_session = {s: p for s, p in zip(result.requests["session"], result.requests["model"], strict=True)}
    assert set(by_session) == {"o", "a", "m"}
    assert result.provider == "openai, anthropic, generic"  # never DeepSeek's rules for an unknown model
    assert result.provider_assumed
    assert any("analyzed with the 'generic' rules" in n for n in result.notes)
    forced = analyze(path, provider="exact")
    assert forced.provider == "exact" and not forced.provider_assumed
    assert not any("analyzed with" in n for n in forced.notes)


def test_lone_surrogates_are_analyzed_as_replacement_characters_with_a_note() -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "bad \ud800 text"}]}
    clean = {"model": "gpt-4o", "messages": [{"role": "user", "content": "bad \ufffd text"}]}
    mended = analyze_requests([body])
    assert mended.problems.height == 0
    assert (
        mended.requests["prompt_tokens"].to_list()
        == analyze_requests([clean]).requests["prompt_tokens"].to_list()
    )
    assert any("lone UTF-16 surrogates" in n for n in mended.notes)


def test_a_request_longer_than_the_context_window_is_noted() -> None:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi " * 140_000}]}
    result = analyze_requests([body], tokenizer="cl100k_base", render="chatml")
    assert any(
        "longer than the largest context window of deepseek (131,072 tokens" in n for n in result.notes
    )
    assert not any("context window" in n for n in analyze_requests([BODY]).notes)


def test_a_session_holds_each_repeated_message_and_tool_list_once(tmp_path: Path) -> None:
    """The loader replaces a message (or tool list) equal to the session's previous record's by that
    very object; a changed one stays the record's own."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    first = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    second = {"messages": [*first["messages"], {"role": "user", "content": "more"}], "tools": tools}
    third = {
        "messages": second["messages"],
        "tools": [*tools, {"type": "function", "function": {"name": "g"}}],
    }
    (tmp_path / "s.jsonl").write_bytes(
        _lines(*({"request": b, "session": "s"} for b in (first, second, third)))
    )
    a, b, c = (r.request for r in read_logs(tmp_path).records)
    assert b["messages"][0] is a["messages"][0] and c["messages"][1] is b["messages"][1]
    assert (
        b["tools"] is a["tools"] and c["tools"] is not b["tools"] and c["tools"][1]["function"]["name"] == "g"
    )


def test_read_file_reads_one_file_as_read_logs_does(tmp_path: Path) -> None:
    """``read_file`` is the loop ``read_logs`` runs per file: the same records (provider recognised,
    a session's repeated messages shared), and, with ``in_time_order`` (the file plan's workers), each
    session's calls of the file in time order, numbered in their slots, the session named; an empty
    file is a problem naming it."""
    from promptkit.formats import Source, get_format, read_file

    path = tmp_path / "calls.jsonl"
    later = {"model": "gpt-4o-mini", "messages": [*BODY["messages"], {"role": "user", "content": "more"}]}
    path.write_bytes(
        _lines(
            {"request": later, "session": "s", "timestamp": 5},
            {"request": BODY, "session": "t", "timestamp": 1},
            {"request": BODY, "session": "s", "timestamp": 2},
        )
    )
    fmt = get_format("promptkit")
    records, problems, reordered = read_file(Source.open(path), fmt)
    assert not problems and reordered == []
    assert [(r.session, r.timestamp) for r in records] == [("s", 5), ("t", 1), ("s", 2)]
    assert {r.provider for r in records} == {"openai"}  # recognised from the model name
    assert records[2].request["messages"][0] is records[0].request["messages"][0]  # shared, in load order
    ordered, _, reordered = read_file(Source.open(path), fmt, in_time_order=True)
    assert reordered == ["s"]
    assert [(r.session, r.index, r.timestamp) for r in ordered] == [("s", 0, 2), ("t", 0, 1), ("s", 1, 5)]
    loaded = read_logs(path)
    assert [(r.session, r.index, r.timestamp) for r in loaded.records] == [
        (r.session, r.index, r.timestamp) for r in ordered
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    _, problems, _ = read_file(Source.open(empty), fmt)
    assert [(p.file, p.reason) for p in problems] == [(str(empty), "no requests in this promptkit log")]


def _interned_reference(old: list, new: list, completion: object) -> list:
    """intern_messages' messages, one message at a time (the loop it replaces)."""
    shared = []
    for i, message in enumerate(new):
        if i < len(old) and (old[i] is message or old[i] == message):
            shared.append(old[i])
        elif i == len(old) and completion is not None and completion == message:
            shared.append(completion)
        else:
            shared.append(message)
    return shared


_MESSAGE = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant"]),
    st.sampled_from("abc"),
)


@given(
    st.lists(_MESSAGE, max_size=8),
    st.lists(st.sampled_from(["same", "copy", "marked", "other"]), max_size=8),
    st.lists(_MESSAGE, max_size=3),
    st.sampled_from(["none", "equal", "other"]),
)
@settings(max_examples=300, deadline=None)
def test_interned_messages_are_the_objects_the_message_by_message_loop_picks(
    old: list, kinds: list, added: list, completion_kind: str
) -> None:
    """The next call's messages: the previous call's objects, equal copies, a copy with a breakpoint
    (the loaders mark a call's last message), other messages, then new ones; the completion of the
    previous call equal to the message after its prompt or not. The result holds the very objects the
    one-at-a-time loop picks."""
    from promptkit.formats import intern_messages
    from promptkit.layout import RequestRecord

    new: list = []
    for message, kind in zip(old, kinds, strict=False):
        new.append(
            message
            if kind == "same"
            else dict(message)
            if kind == "copy"
            else {**message, "cache_control": {"type": "ephemeral"}}
            if kind == "marked"
            else {"role": "user", "content": "z"}
        )
    new += [dict(m) for m in added]
    completion = None
    if completion_kind != "none" and len(new) > len(old):
        completion = (
            dict(new[len(old)]) if completion_kind == "equal" else {"role": "assistant", "content": "y"}
        )
    previous = RequestRecord({"messages": old}, "s", completion=completion)
    expected = _interned_reference(old, new, completion)
    got = intern_messages(previous, RequestRecord({"messages": list(new)}, "s")).request["messages"]
    assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected, strict=True))


def _os_walk(root: Path, errors: list[Any], hidden: list[str] | None = None) -> Any:
    """The directory walk as it was (``os.walk``, a ``Path`` per folder): the reference the scandir walk
    of :func:`~promptkit.formats.discovery.find_log_files` is compared with."""
    from promptkit.formats.discovery import is_log_name
    from promptkit.layout import LoadProblem

    def unreadable(exc: OSError) -> None:
        where = exc.filename if exc.filename is not None else str(root)
        errors.append(
            LoadProblem(
                str(where), None, f"directory cannot be read: {exc.strerror or exc}; its logs were not read"
            )
        )

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        base = Path(folder)
        if hidden is not None:
            hidden.extend(str(base / d) + "/" for d in sorted(dirs) if d.startswith("."))
            hidden.extend(str(base / n) for n in sorted(names) if n.startswith(".") and is_log_name(n))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith("."):
                yield base / name
        for d in dirs:
            if (base / d).is_symlink():
                yield base / d


_NAMES = st.sampled_from(
    ["a", "b-c", "b", "a b", ".h", "x.jsonl", ".y.jsonl", "z.txt", "a-b.json", "A.ndjson"]
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(_NAMES, min_size=1, max_size=4), min_size=1, max_size=12),
    st.lists(
        st.tuples(st.lists(_NAMES, min_size=1, max_size=3), st.sampled_from(["dir", "file", "none"])),
        max_size=3,
    ),
)
def test_the_scandir_walk_lists_what_os_walk_listed(
    files: list[list[str]], links: list[tuple[list[str], str]]
) -> None:
    """Random trees of folders, logs, other files, hidden entries and symlinks (to a folder, a file,
    nothing): the files, the passed-over counts and the problems, in order, as the ``os.walk`` walk
    found them."""
    import tempfile

    from promptkit.formats import discovery

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "logs"
        root.mkdir()
        for parts in files:
            path = root.joinpath(*parts)
            if any(p.exists() and not p.is_dir() for p in [*path.parents][: len(parts) - 1]) or path.is_dir():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
        for parts, kind in links:
            link = root.joinpath(*parts)
            if link.exists() or link.is_symlink() or not link.parent.is_dir():
                continue
            target = {"dir": root, "file": next(root.rglob("*.jsonl"), root / "nope"), "none": root / "gone"}[
                kind
            ]
            link.symlink_to(target)
        got: list[Any] = []
        try:
            found = discovery.find_log_files(root, problems=got)
        except LogFileError as exc:
            found = exc  # type: ignore[assignment]
        old = discovery._walk
        want: list[Any] = []
        try:
            discovery._walk = _os_walk  # type: ignore[assignment]
            expected = discovery.find_log_files(root, problems=want)
        except LogFileError as exc:
            expected = exc  # type: ignore[assignment]
        finally:
            discovery._walk = old  # type: ignore[assignment]
        assert str(found) == str(expected) and got == want


def test_the_analysis_on_workers_lists_the_logs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``analyze(DIR, jobs=2)`` sizes the logs (are they worth the workers?) and cuts them into tasks from
    one listing: the folder is walked once."""
    from promptkit.formats import discovery

    walks: list[object] = []
    real = discovery.find_log_files

    def counted(paths: Any, **kw: Any) -> Any:
        walks.append(paths)
        return real(paths, **kw)

    monkeypatch.setattr(discovery, "find_log_files", counted)
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", "0")
    result = analyze("fixtures/real-logs/deepseek", provider="deepseek", view="simulated", jobs=2)
    assert result.requests.height == 154 and len(walks) == 1
