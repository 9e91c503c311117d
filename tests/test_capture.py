"""promptkit.capture with the real openai and anthropic clients against the local fake upstream."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from promptkit.capture import LayoutMismatchWarning, capture
from promptkit.formats import read_logs as load_log
from tests.proxy.fake_upstream import Upstream, upstream_thread

KEY = "sk-proj-" + "K" * 40


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with upstream_thread() as upstream:
        yield upstream


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_openai_sync_whole_and_streamed_calls_are_recorded(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    plain = openai.OpenAI(api_key=KEY, base_url=up.url + "/v1", max_retries=0)
    client = openai.OpenAI(api_key=KEY, base_url=up.url + "/v1", max_retries=0)
    recorder = capture(client, log, session="app")
    assert recorder.client is client
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]
    whole = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    expected = plain.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert whole.model_dump() == expected.model_dump()
    assert up.received[-1]["body"] == up.received[-2]["body"]  # nothing sent is changed
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,  # type: ignore[arg-type]
                                                 stream_options={"include_usage": True}))  # fmt: skip
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    first, second = lines(log)
    assert first["session"] == second["session"] == "app"
    assert first["response"]["choices"][0]["message"]["content"] == text
    assert second["http"]["stream"] is True
    assert second["response"]["choices"][0]["message"]["content"] == text
    assert second["response"]["usage"] == chunks[-1].usage.model_dump(exclude_none=True)  # type: ignore[union-attr]
    assert KEY not in log.read_text() and "authorization" not in log.read_text().lower()
    assert len(load_log(log).records) == 2


def test_openai_async_responses_api(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=up.url + "/v1", max_retries=0)
        capture(client, log)
        whole = await client.responses.create(model="gpt-5", instructions="Be terse.", input="hi")
        events = [e async for e in await client.responses.create(model="gpt-5", instructions="Be terse.",
                                                                  input="hi", stream=True)]  # fmt: skip
        assert events[-1].type == "response.completed"
        assert whole.output_text.startswith("Answer ")
        await client.close()

    asyncio.run(main())
    first, second = lines(log)
    for rec in (first, second):
        assert [m["role"] for m in rec["request"]["messages"]] == ["system", "user"]
        assert rec["response"]["choices"][0]["message"]["content"].startswith("Answer ")
        assert rec["original"]["response"]["usage"]["output_tokens"] == 12
    assert first["session"] == second["session"]  # prefix affinity: same head, same messages


def test_anthropic_sync_stream_and_async_with_layout(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    client = anthropic.Anthropic(api_key=KEY, base_url=up.url, max_retries=0)
    recorder = capture(client, log, session="claude")
    layout = [("identity", "persona.card"), ("current", None)]
    with recorder.layout(layout):
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64, system="Be terse.",
                                    messages=[{"role": "user", "content": "hi"}]) as stream:  # fmt: skip
            final = stream.get_final_message()
    assert final.content[1].input == {"query": "fox"}  # type: ignore[union-attr]

    async def main() -> None:
        aclient = anthropic.AsyncAnthropic(api_key=KEY, base_url=up.url, max_retries=0)
        capture(aclient, log, session="claude")
        msg = await aclient.messages.create(model="claude-sonnet-4-5", max_tokens=64,
                                            messages=[{"role": "user", "content": "hi"}])  # fmt: skip
        assert msg.usage.output_tokens == 17
        await aclient.close()

    asyncio.run(main())
    streamed, whole = lines(log)
    assert streamed["layout"] == [{"slot": "current", "key": None}]  # the system entry went to "system"
    assert streamed["response"]["content"] == [block.model_dump(exclude_none=True) for block in final.content]
    assert streamed["response"]["usage"]["output_tokens"] == final.usage.output_tokens == 17
    assert "layout" not in whole
    loaded = load_log(log)
    assert [r.usage.completion_tokens for r in loaded.records] == [17, 17]  # type: ignore[union-attr]


def test_layout_that_does_not_align_warns(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    client = openai.OpenAI(api_key=KEY, base_url=up.url + "/v1", max_retries=0)
    recorder = capture(client, log)
    with (
        recorder.layout([("identity", "a"), ("context", "b"), ("current", None)]),
        warnings.catch_warnings(record=True) as seen,
    ):
        warnings.simplefilter("always")
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert any(issubclass(w.category, LayoutMismatchWarning) for w in seen)
    assert "layout" not in lines(log)[0]


def test_failed_and_dropped_calls_are_recorded_as_errors(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    client = openai.OpenAI(api_key=KEY, base_url=up.url + "/v1", max_retries=0)
    capture(client, log)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="fail-503", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.APIError):
        list(
            client.chat.completions.create(
                model="drop", stream=True, messages=[{"role": "user", "content": "x"}]
            )
        )
    failed, dropped = lines(log)
    assert failed["error"]["kind"] == "http-status" and failed["error"]["status"] == 503
    assert dropped["error"]["kind"] == "stream-dropped"
    assert dropped["error"]["partial_response"]["choices"][0]["message"]["content"].startswith("Answer")


def test_a_body_too_deep_to_parse_never_fails_the_users_call(tmp_path: Path) -> None:
    # mutation checked: with json.loads instead of loads_json in Recorder._begin and the guard of
    # Recorder._begin_safely removed, the RecursionError reaches the user's call
    import httpx2

    def api(request: Any) -> Any:
        return httpx2.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    http = httpx2.Client(transport=httpx2.MockTransport(api))
    recorder = capture(http, tmp_path / "calls.jsonl", session="deep")
    deep = '{"model": "m", "messages": [], "x": ' + '{"a": [' * 2000 + "1" + "]}" * 2000 + "}"
    answer = http.post("https://api.openai.com/v1/chat/completions", content=deep.encode())
    assert answer.json()["choices"][0]["message"]["content"] == "ok"
    assert recorder.unrecorded == 1  # counted (and logged), not lost silently
    shallow = '{"model": "m", "messages": [], "x": ' + '{"a": [' * 300 + "1" + "]}" * 300 + "}"
    http.post("https://api.openai.com/v1/chat/completions", content=shallow.encode())
    assert recorder.log.written == 1 and recorder.log.too_deep == 1
    assert "nested deeper than" in (tmp_path / "calls.jsonl").read_text(encoding="utf-8")


def test_a_recording_fault_never_fails_the_users_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx2

    import promptkit.capture as cap

    def broken(**_kw: Any) -> Any:
        raise RuntimeError("a bug in promptkit")

    monkeypatch.setattr(cap, "exchange_record", broken)
    http = httpx2.Client(transport=httpx2.MockTransport(lambda r: httpx2.Response(200, json={"ok": 1})))
    recorder = capture(http, tmp_path / "calls.jsonl")
    assert http.post("https://api.openai.com/v1/chat/completions", json={"messages": []}).json() == {"ok": 1}
    assert recorder.unrecorded == 1


def test_an_existing_log_readable_by_others_is_made_private(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from promptkit.capture import RecordLog

    path = tmp_path / "calls.jsonl"
    path.write_text("")
    path.chmod(0o644)
    with caplog.at_level("WARNING", logger="promptkit.capture"):
        assert RecordLog(path).append({"request": {"messages": []}})
    assert path.stat().st_mode & 0o777 == 0o600
    assert "was readable by others (mode 644)" in caplog.text


def test_a_log_path_that_is_a_symbolic_link_is_refused_not_followed(tmp_path: Path) -> None:
    from promptkit.capture import RecordLog

    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("untouched\n")
    link = tmp_path / "calls.jsonl"
    link.symlink_to(elsewhere)
    log = RecordLog(link)
    assert log.append({"request": {"messages": []}}) is False
    assert log.failures == 1 and log.last_error is not None and "symbolic link" in log.last_error
    assert elsewhere.read_text() == "untouched\n"


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_log_removed_or_replaced_while_recording_is_started_again(tmp_path: Path, how: str) -> None:
    from promptkit.capture import RecordLog

    path = tmp_path / "calls.jsonl"
    log = RecordLog(path)
    assert log.append({"n": 1})
    path.unlink()
    if how == "replaced":
        path.write_text('{"n": 0}\n')
    assert log.append({"n": 2}) and log.append({"n": 3})
    kept = [json.loads(line)["n"] for line in path.read_text().splitlines()]
    assert kept == ([0, 2, 3] if how == "replaced" else [2, 3])  # nothing written into the lost file
    assert log.reopened == 1 and log.written == 3


@pytest.mark.slow
def test_a_stream_never_read_to_its_end_is_recorded_at_exit(up: Upstream, tmp_path: Path) -> None:
    """A streamed answer the program neither reads to its end nor closes: at exit it used to end in an
    ImportError and nothing was written; the exit hook records it as stream-not-closed."""
    import subprocess
    import sys

    log = tmp_path / "calls.jsonl"
    script = f"""
import openai
from promptkit.capture import capture
client = openai.OpenAI(api_key="k", base_url={up.url + "/v1"!r}, max_retries=0)
recorder = capture(client, {str(log)!r}, session="app")
stream = client.chat.completions.create(model="gpt-4o", messages=[{{"role": "user", "content": "hi"}}], stream=True)
next(iter(stream))  # one chunk read, the stream left open: the program ends
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "ImportError" not in run.stderr and "not recorded" not in run.stderr
    (record,) = lines(log)
    assert record["error"]["kind"] == "stream-not-closed"
    assert record["session"] == "app" and record["request"]["messages"][0]["content"] == "hi"
