"""Fuzzing: every log format's loader and every grammar, under hypothesis.

Two promises are checked on inputs nobody would write on purpose (mutated real fixtures, random JSON,
garbage text and bytes, compressed or not, huge numbers, deep nesting, lone surrogates):

- **no exception escapes** other than :class:`~promptkit.errors.PromptkitError` (the one-line error the
  CLI prints), and such an error names the file;
- **no record goes unaccounted**: in a JSON Lines file every non-blank line is a record or a problem
  (promptkit's own format; for the other formats, once a file gave records, every line that is not JSON
  is a problem); a non-empty
  file gives at least one record or problem; every record and problem names the file.

Formats are iterated generically (:func:`promptkit.formats.available_formats`): a format added later is
fuzzed with no edit here, seeded by the fixture files under ``fixtures/`` it sniffs. The example count
comes from the hypothesis profile (``tests/conftest.py``); ``benchmarks/fuzz.py`` runs these same
properties at 10,000 examples each. :data:`STATS` counts what the runs saw.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import pathlib
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, strategies as st

from promptkit.chat import attachments, identity, mentions
from promptkit.errors import LogFileError, PromptkitError
from promptkit.formats import available_formats, read_logs
from promptkit.formats.base import Source
from promptkit.layout import RequestRecord

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
FORMAT_NAMES = sorted(available_formats())
LINE_SUFFIXES = (".jsonl", ".ndjson")
#: File names every format is fuzzed under (the format is forced, so the name only steers the reader);
#: the names of the fixtures a format sniffs are added to its own list.
GENERIC_NAMES = ("calls.jsonl", "calls.ndjson", "calls.json", "run.traj.json", "capture.har")
#: What the fuzz runs saw, by (property, outcome): examples, records, problems, errors.
STATS: Counter[tuple[str, str]] = Counter()

# --- seeds: the fixtures each format sniffs, trimmed ------------------------------------------------


def _trim(obj: Any, depth: int = 0) -> Any:
    """A small copy of a real document: lists cut to 4 items, strings to 200 characters (JSON text inside
    a string is trimmed as JSON), depth to 12."""
    if depth > 12:
        return None
    if isinstance(obj, list):
        return [_trim(x, depth + 1) for x in obj[:4]]
    if isinstance(obj, dict):
        return {k: _trim(v, depth + 1) for k, v in list(obj.items())[:24]}
    if isinstance(obj, str) and obj.lstrip()[:1] in ("{", "["):  # a body stored as its JSON text
        try:
            return json.dumps(_trim(json.loads(obj), depth + 1))
        except ValueError:
            return obj[:200]
    if isinstance(obj, str):
        return obj[:200]
    return obj


@functools.cache
def seeds() -> dict[str, tuple[tuple[str, ...], tuple[Any, ...], tuple[Any, ...]]]:
    """``{format: (file names, JSONL line seeds, whole-document seeds)}`` from ``fixtures/``."""
    found: dict[str, tuple[set[str], list[Any], list[Any]]] = {n: (set(), [], []) for n in FORMAT_NAMES}
    formats = available_formats()
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.suffix in (".py", ".md") or path.stat().st_size > 16_000_000:
            continue
        try:
            source = Source.open(path)
        except PromptkitError:
            continue
        for name, fmt in formats.items():
            try:
                accepted = fmt.sniff(source)
            except Exception:
                continue
            if not accepted:
                continue
            names, lines, docs = found[name]
            names.add(source.name)
            try:
                if source.name.endswith(LINE_SUFFIXES):
                    for _, text in list(source.lines())[:30]:
                        if text.strip():
                            lines.append(_trim(json.loads(text)))
                else:
                    docs.append(_trim(json.loads(source.text())))
            except (PromptkitError, ValueError):
                continue
    return {
        name: (tuple(sorted(names | set(GENERIC_NAMES))), tuple(lines), tuple(docs))
        for name, (names, lines, docs) in found.items()
    }


# --- strategies ---------------------------------------------------------------------------------------

KEYS = (
    "messages role content request response usage choices message tool_calls function arguments name "
    "tools model session timestamp layout slot key provider url meta prompt_tokens completion_tokens "
    "cached_tokens prompt_tokens_details input_tokens output_tokens cache_read_input_tokens "
    "cache_creation_input_tokens extra created info config model_name type text log entries postData "
    "mimeType headers status status_code body method startedDateTime id index delta"
).split()
WORDS = ("system", "user", "assistant", "tool", "POST", "https://api.deepseek.com/chat/completions",
         "deepseek-chat", "gpt-4o", "claude-sonnet-4", "2026-01-02T03:04:05Z", "", "\ud800", "𝒜", "\x00")

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5),
    max_leaves=10,
)


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*path, i))


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    """``seed`` with a few random edits: a value replaced, retyped, deleted or duplicated."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.sampled_from(list(_paths(doc))))
        op = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "stringify"]))
        if not path:
            doc = draw(json_values) if op == "replace" else doc
            continue
        *head, last = path
        parent = doc
        for step in head:
            parent = parent[step]
        if op == "replace":
            parent[last] = draw(json_values)
        elif op == "delete":
            del parent[last]
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        elif op == "stringify":
            parent[last] = json.dumps(parent[last])
    return doc


def _dumps(draw: st.DrawFn, value: Any) -> str:
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


HOSTILE = st.sampled_from(
    [
        '{"messages": [], "timestamp": 1' + "0" * 5000 + "}",  # past int's digit limit
        "[" * 100_000 + "]" * 100_000,  # deeper than the recursion limit
        '{"messages": [{"role": "user", "content": "\\ud800"}]}',  # a lone surrogate
        '{"messages": [{"role": "user", "content": "x"}], "timestamp": NaN}',
        '{"messages": [{"role": "user", "content": "x"}], "timestamp": -Infinity}',
        '{"request": {"messages": [{"role": "user", "content": "x"}]}, "usage": {"prompt_tokens": 1e400}}',
        "\ufeff{}",
        "\x00\x01\x02",
        "{",
        "null",
    ]
)


@st.composite
def line_text(draw: st.DrawFn, line_seeds: tuple[Any, ...]) -> str:
    kind = draw(st.sampled_from(["seed", "seed", "json", "text", "blank", "hostile"] if line_seeds
                                else ["json", "json", "text", "blank", "hostile"]))
    if kind == "seed":
        text = _dumps(draw, draw(mutated(draw(st.sampled_from(line_seeds)))))
    elif kind == "json":
        text = _dumps(draw, draw(json_values))
    elif kind == "text":
        text = draw(st.text(max_size=40))
    elif kind == "blank":
        text = draw(st.sampled_from(["", " ", "\t", "\r"]))
    else:
        text = draw(HOSTILE)
    return text.replace("\n", " ")


@st.composite
def log_file(draw: st.DrawFn, fmt: str) -> tuple[str, bytes]:
    """A file name the format is read under and the file's bytes (maybe compressed)."""
    names, line_seeds, doc_seeds = seeds()[fmt]
    name = draw(st.sampled_from(names))
    mode = draw(st.sampled_from(["structured", "structured", "structured", "bytes"]))
    if mode == "bytes":
        raw = draw(st.binary(max_size=200))
    else:
        if name.endswith(LINE_SUFFIXES):
            lines = draw(st.lists(line_text(line_seeds), min_size=0, max_size=6))
            text = draw(st.sampled_from(["\n", "\r\n"])).join(lines) + draw(st.sampled_from(["", "\n"]))
        else:
            kind = draw(st.sampled_from(["seed", "seed", "json", "truncated", "hostile"] if doc_seeds
                                        else ["json", "truncated", "hostile"]))
            if kind == "seed":
                text = _dumps(draw, draw(mutated(draw(st.sampled_from(doc_seeds)))))
            elif kind == "json":
                text = _dumps(draw, draw(json_values))
            elif kind == "truncated":
                full = _dumps(draw, draw(mutated(draw(st.sampled_from(doc_seeds))))) if doc_seeds else "{}"
                text = full[: draw(st.integers(0, len(full)))]
            else:
                text = draw(HOSTILE)
        raw = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 5)) == 0:
        raw = gzip.compress(raw)
        name += ".gz"
    return name, raw


# --- the loader property ----------------------------------------------------------------------------


def check_loader(fmt: str | None, name: str, raw: bytes, where: str) -> None:
    """Write ``raw`` as ``name``, read it with ``fmt`` (None: sniffed) and check the two promises."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="promptkit-fuzz-"))
    try:
        path = folder / name
        path.write_bytes(raw)
        STATS[(where, "examples")] += 1
        try:
            result = read_logs(path, format=fmt)
        except PromptkitError as exc:
            message = str(exc)
            assert "\n" not in message.strip(), f"a multi-line error: {message!r}"
            if isinstance(exc, LogFileError):
                assert exc.path == str(path), message
            STATS[(where, "errors")] += 1
            return
        STATS[(where, "records")] += len(result.records)
        STATS[(where, "problems")] += len(result.problems)
        assert all(r.file == str(path) for r in result.records)
        assert all(p.file == str(path) for p in result.problems)
        for record in result.records:
            assert isinstance(record, RequestRecord)
            json.dumps(record.to_json(), allow_nan=True)  # a record can always be written back
        assert result.records or result.problems, "a file read without a record or a problem"
        if not name.removesuffix(".gz").endswith(LINE_SUFFIXES):
            return
        try:
            text = Source.open(path).text()
        except PromptkitError:  # not text: the reader's problems say so
            assert result.problems, "a file that is not text read without a problem"
            return
        lines = {
            i: line.removesuffix("\r")
            for i, line in enumerate(text.split("\n"), 1)
        }
        covered = {r.line for r in result.records} | {p.line for p in result.problems}
        whole_file = None in {p.line for p in result.problems}
        for lineno, line in lines.items():
            if not line.strip() or whole_file:
                continue
            if result.formats == {"promptkit": 1}:  # one call per line: a record or a problem
                assert lineno in covered, f"line {lineno} is neither a record nor a problem: {line[:200]!r}"
            elif result.records and not _is_json(line):  # it read the lines: a skipped one is a problem
                assert lineno in {p.line for p in result.problems}, f"line {lineno} is not JSON, and no problem says so"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(data=st.data())
def test_format_loader_fuzz(fmt: str, data: st.DataObject) -> None:
    """Each file is read twice: with the format forced, and sniffed (``format=None``), where a file no
    format accepts must be a one-line LogFileError."""
    name, raw = data.draw(log_file(fmt), label="file")
    check_loader(fmt, name, raw, f"loader:{fmt}")
    check_loader(None, name, raw, f"sniffed:{fmt}")


def test_every_format_has_a_seed_or_is_fuzzed_from_scratch() -> None:
    """Formats with fixtures are fuzzed from mutated real files (the ones shipped today all have them)."""
    table = seeds()
    for name in ("promptkit", "mini-swe-agent"):
        _, lines, docs = table[name]
        assert lines or docs, name


# --- grammars -----------------------------------------------------------------------------------------

GRAMMAR_TOKENS = st.sampled_from(
    ["[", "]", "|", " | ref:", "ref:", "[图片", "[文件", "[音频", "[视频", ": ", "\n", " ", "[CQ:", "CQ:at",
     ",", "=", "qq=", "&#91;", "&#93;", "&#44;", "&amp;", "&", "<at", "<at self", " self", ' id="', '"',
     '">', ">", "</at>", "<forward", "</forward>", "<image", "/>", "<", "＜", "\ud800", "𝒜", "ｚ", "a", "1",
     "[小明(42)]: ", "\r", "\u2028"]
)
grammar_text = st.text(max_size=60) | st.lists(GRAMMAR_TOKENS | st.text(max_size=3), max_size=30).map("".join)


def _check_attachments(data: st.DataObject) -> None:
    text = data.draw(grammar_text)
    for ref in attachments.parse_attachment_refs(text):
        assert ref.ref in text and "\n" not in ref.ref and "]" not in ref.ref
        assert ref.ref == ref.ref.strip() != "" and (ref.desc is None or ref.desc == ref.desc.strip() != "")
        assert attachments.parse_attachment_refs(attachments.format_attachment_ref(ref))  # formats back


def _check_cq(data: st.DataObject) -> None:
    text = data.draw(grammar_text)
    segments = mentions.parse_cq_segments(text)
    assert all(isinstance(s, mentions.CQSegment) for s in segments)
    mentions.normalize_cq_message(text, self_id=data.draw(st.none() | st.text(max_size=3)))


def _check_split(data: st.DataObject) -> None:
    text = data.draw(grammar_text)
    max_len = data.draw(st.integers(1, 20))
    pieces = mentions.split_markup_text(text, max_len)
    assert "".join(pieces) == text and all(pieces)


def _check_mentions(data: st.DataObject) -> None:
    text = data.draw(grammar_text)
    assert all(f'id="{i}">' in text for i in mentions.extract_mentions(text))
    assert mentions.check_immediate_mention(text) == (mentions.AT_SELF_PATTERN.search(text) is not None)
    escaped = mentions.escape_markup(text)
    assert mentions.escape_markup(escaped) == escaped and not mentions.extract_mentions(escaped)


def _check_identity(data: st.DataObject) -> None:
    content = data.draw(grammar_text)
    label = data.draw(st.none() | grammar_text)
    stripped = identity.strip_sender_prefix(content, label)
    assert content.endswith(stripped)
    nickname, user_id = data.draw(st.none() | grammar_text), data.draw(st.none() | grammar_text)
    prefixed = identity.prefix_sender(content, nickname, user_id)
    assert identity.strip_sender_prefix(prefixed, identity.get_sender_label(nickname, user_id)) == content
    name = identity.get_message_name(user_id)
    assert name is None or 0 < len(name) <= 64


GRAMMARS: dict[str, Callable[[st.DataObject], None]] = {
    "attachments": _check_attachments,
    "cq-codes": _check_cq,
    "split-markup": _check_split,
    "mentions": _check_mentions,
    "identity": _check_identity,
}


@pytest.mark.slow
@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
@given(data=st.data())
def test_grammar_fuzz(grammar: str, data: st.DataObject) -> None:
    """The grammars take any string: no error at all, and every check of each example runs (an expected
    error would be caught at the call that raises it, so the checks after it still run)."""
    STATS[(f"grammar:{grammar}", "examples")] += 1
    GRAMMARS[grammar](data)


@pytest.mark.slow
@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
@given(value=json_values | st.binary(max_size=8) | st.just(math.pi))
def test_grammar_functions_take_only_strings(grammar: str, value: Any) -> None:
    """A non-string where a string belongs is a PromptkitError, never a TypeError from deep inside."""
    functions: dict[str, list[Callable[[Any], Any]]] = {
        "attachments": [attachments.parse_attachment_refs],
        "cq-codes": [mentions.parse_cq_segments, mentions.normalize_cq_message],
        "split-markup": [lambda v: mentions.split_markup_text(v, 5)],
        "mentions": [mentions.extract_mentions, mentions.check_immediate_mention, mentions.escape_markup],
        "identity": [lambda v: identity.strip_sender_prefix(v, "x")],
    }
    for fn in functions[grammar]:
        if isinstance(value, str):
            fn(value)
            continue
        with pytest.raises(PromptkitError):
            fn(value)
