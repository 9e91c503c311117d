"""The recording proxy under bad inputs and faults: credential headers of every shape, URL credentials,
GETs on API paths, bodies nested deeper than any parser likes, a log torn by a crash, timeouts, and
bounded live state."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import aiohttp
import pytest

from promptkit.formats import read_logs
from promptkit.proxy import ProxyConfig, ProxyConfigError, serve
from promptkit.proxy.live import LiveFigures, _size
from promptkit.proxy.server import LIVE_PATH
from tests.proxy.fake_upstream import fake_upstream
from tests.proxy.test_server import records, run

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
#: headers that can carry a credential, none of them in the fixed list of well-known names
CUSTOM_SECRETS = {
    "X-Custom-Token": "tok-custom-0001",
    "X-Vendor-Key": "key-vendor-0002",
    "X-Client-Secret": "secret-client-0003",
    "X-Amz-Security-Token": "amz-0004",
    "Proxy-Authorization": "Basic cHJveHk6MDAwNQ==",
    "Cookie": "session=cookie-0006",
}


def test_every_header_that_can_carry_a_credential_is_left_out_of_the_record(tmp_path: Path) -> None:
    # mutation checked: with the secret-word filter removed from is_secret_header (only the fixed
    # SENSITIVE_HEADERS list left), X-Custom-Token, X-Vendor-Key, X-Client-Secret... reach the log
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                headers = {**CUSTOM_SECRETS, "Authorization": "Bearer abc", "X-Trace-Id": "trace-7"}
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
                    assert r.status == 200
            sent = dict(up.received[0]["headers"])
            assert sent["X-Custom-Token"] == "tok-custom-0001"  # forwarded unchanged

    run(main)
    text = log.read_text(encoding="utf-8")
    for name, value in CUSTOM_SECRETS.items():
        assert value not in text, name
        assert name.lower() not in text, name
    [rec] = records(log)
    assert rec["http"]["headers"]["x-trace-id"] == "trace-7"  # a harmless header is kept


def test_a_get_to_an_api_path_is_forwarded_and_not_recorded(tmp_path: Path) -> None:
    # mutation checked: recording every method (api_from_url without the POST test) records the GET
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
                    async with s.get(proxy.url + path, json=CHAT) as r:  # a GET with a call's body
                        assert r.status == 200  # forwarded: the fake upstream answers GETs
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
            assert [r["method"] for r in up.received] == ["GET", "GET", "GET", "POST"]
            assert proxy.state.forwarded == 4 and proxy.state.unrecorded == 0

    run(main)
    assert [rec["http"]["method"] for rec in records(log)] == ["POST"]


def test_upstream_url_credentials_are_sent_but_never_written_or_shown(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    said: list[str] = []

    async def main() -> None:
        async with fake_upstream() as up:
            host = up.url.removeprefix("http://")
            config = ProxyConfig(upstream=f"http://alice:pw-9f8e7d@{host}", port=0, log=log)
            async with serve(config) as proxy, aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                # a client Authorization header with credentials in the URL: no 500, the client's wins
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT,
                                  headers={"Authorization": "Bearer client"}) as r:  # fmt: skip
                    assert r.status == 200
                async with s.get(proxy.url + LIVE_PATH + "/stats.json") as r:
                    stats = await r.text()
                async with s.get(proxy.url + LIVE_PATH + "/") as r:
                    page = await r.text()
            said.append(config.upstream_display)
            first, second = (dict(r["headers"]) for r in up.received)
            assert first["Authorization"] == "Basic " + base64.b64encode(b"alice:pw-9f8e7d").decode()
            assert second["Authorization"] == "Bearer client"
            assert "pw-9f8e7d" not in stats and "pw-9f8e7d" not in page
            assert "alice" in json.loads(stats)["upstream"]

    run(main)
    assert "pw-9f8e7d" not in log.read_text(encoding="utf-8")
    assert "pw-9f8e7d" not in said[0] and len(records(log)) == 2


def test_the_banner_never_shows_the_upstream_password() -> None:
    config = ProxyConfig(upstream="https://bob:hunter2@api.example.com", log=None)
    assert "hunter2" not in config.upstream_display
    with pytest.raises(ProxyConfigError) as err:
        ProxyConfig(upstream="ftp://bob:hunter2@api.example.com")
    assert "hunter2" not in str(err.value)


def _nested_text(depth: int) -> str:
    """A JSON text nested ``2 * depth`` levels (built as text: ``json.dumps`` itself recurses)."""
    return '{"a": [' * depth + '"leaf"' + "]}" * depth


@pytest.mark.parametrize("depth", [300, 600, 2000])
def test_a_deeply_nested_body_is_forwarded_and_recorded_or_counted(tmp_path: Path, depth: int) -> None:
    # levels: each step is an object and a list, so 2 * depth JSON levels
    log = tmp_path / "calls.jsonl"
    raw = json.dumps(CHAT)[:-1] + ', "metadata": ' + _nested_text(depth) + "}"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", data=raw,
                                  headers={"Content-Type": "application/json"}) as r:  # fmt: skip
                    assert r.status == 200  # never a 500 from the proxy
            assert up.received[0]["body"] == raw.encode()  # forwarded unchanged
            await proxy.state.drained()  # recording runs off the event loop
            state = proxy.state
            written = state.log.written if state.log is not None else 0
            too_deep = state.log.too_deep if state.log is not None else 0
            # recorded (the deep part as a counted marker), or counted as unrecorded: never lost
            assert written + state.unrecorded == 1
            assert written == 0 or too_deep == 1

    run(main)
    loaded = records(log) if log.exists() else []
    if loaded:
        assert "nested deeper than" in log.read_text(encoding="utf-8")
        assert loaded[0]["request"]["messages"] == CHAT["messages"]
    if depth == 300:
        assert len(loaded) == 1  # 600 levels: parsed, recorded, the deep part a marker


def test_a_restarted_proxy_starts_on_a_fresh_line_after_a_torn_one(tmp_path: Path) -> None:
    # mutation checked: without the last-byte check in RecordLog._open the next record is glued onto
    # the torn line and lost
    log = tmp_path / "calls.jsonl"
    whole = json.dumps({"request": {"messages": [{"role": "user", "content": "one"}]}})
    log.write_text(whole + "\n" + whole[:30], encoding="utf-8")  # a crash mid-record

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200

    run(main)
    lines = log.read_text(encoding="utf-8").split("\n")
    assert lines[1] == whole[:30] and json.loads(lines[2])["request"] == CHAT
    loaded = read_logs(log)
    assert len(loaded.records) == 2
    [problem] = loaded.problems
    assert problem.line == 2 and "invalid JSON" in problem.reason


@pytest.mark.parametrize("value", [-1.0, 0.0, math.nan, math.inf])
def test_timeouts_must_be_positive_and_finite(value: float) -> None:
    with pytest.raises(ProxyConfigError, match="read_timeout: expected a number of seconds greater than 0"):
        ProxyConfig(upstream="http://127.0.0.1:9", log=None, read_timeout=value)
    with pytest.raises(ProxyConfigError, match="connect_timeout"):
        ProxyConfig(upstream="http://127.0.0.1:9", log=None, connect_timeout=value)


def test_live_figures_hold_a_bounded_number_of_requests() -> None:
    figures = LiveFigures(predict=True, max_held=4, max_sessions=10, max_pending=1000)
    big = "x" * 10_000
    try:
        for k in range(30):
            record = {"request": {"model": "gpt-4o", "messages": [{"role": "user", "content": big + str(k)}]},
                      "http": {"api": "openai-chat"},
                      "response": {"usage": {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 50}}}}  # fmt: skip
            figures.observe(record, f"s{k}")
        figures.wait(timeout=60)
        assert figures.held_requests() == 4  # exactly max_held: the 4 most recent sessions
        snap = figures.snapshot()
        assert len(snap["sessions"]) == 10 and snap["retired_sessions"] == 20
        assert snap["totals"]["requests"] == 30  # retired sessions still count
        assert snap["totals"]["reported_hit_ratio"] == 0.5
        assert snap["released_requests"] == 30 - 4  # each session past the 4th released one request
    finally:
        figures.close()


def test_live_breaks_are_only_calls_that_lost_tokens_and_name_how_many() -> None:
    from promptkit.analysis import analyze_requests
    from promptkit.layout import RequestRecord

    system = {"role": "system", "content": "You are a careful assistant. " * 40}
    turn1 = [system, {"role": "user", "content": "q1"}]
    turn2 = [*turn1, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    changed = [{"role": "system", "content": system["content"] + "Today is Monday."}, *turn2[1:]]
    figures = LiveFigures(predict=True)
    try:
        # a new turn, a retry of the same prompt (every token shared) and then a changed system prompt
        for messages in (turn1, turn2, turn2, changed):
            figures.observe({"request": {"model": "gpt-4o", "messages": messages}, "http": {"api": "openai-chat"}}, "s")
        figures.wait(timeout=60)
        [live] = figures.snapshot()["sessions"]
        [brk] = live["last_breaks"]
        frame = analyze_requests(
            [RequestRecord({"model": "gpt-4o", "messages": m}, session="s", index=i) for i, m in enumerate((turn2, changed))],
            provider="openai",
        ).requests
        lost = frame["prompt_tokens"][0] - frame["prefix_tokens"][1]
        assert (brk["index"], brk["role"], brk["message"], brk["lost_tokens"]) == (3, "system", 0, lost)
        assert lost > 0
    finally:
        figures.close()


def test_a_failed_call_is_counted_as_an_error_and_never_predicted() -> None:
    figures = LiveFigures(predict=True)
    try:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        figures.observe({"request": body, "http": {"api": "openai-chat"},
                         "error": {"kind": "upstream-status", "message": "502"}}, "s")  # fmt: skip
        figures.wait(timeout=60)
        [live] = figures.snapshot()["sessions"]
        assert (live["requests"], live["errors"], live["predicted_requests"]) == (1, 1, 0)
        assert figures.held_requests() == 0  # nothing of a failed call is held for the next prediction
    finally:
        figures.close()


def test_predictions_past_the_queue_bound_are_skipped_and_counted() -> None:
    figures = LiveFigures(predict=True, max_pending=0)
    figures.observe({"request": {"model": "gpt-4o", "messages": []}, "http": {"api": "openai-chat"}}, "s")
    assert figures.snapshot()["skipped_predictions"] == 1
    figures.close()


def test_a_call_that_cannot_be_recorded_is_named_on_stderr_without_its_query_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The record is never written with a credential; the warning that says it was not written must not
    print one either (the query string of the call and the upstream's own)."""
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                url = proxy.url + "/v1/messages?key=QKEY-7f3e&api_key=QKEY-8a1b&alt=json"
                async with s.post(url, data=b'{"model": "x", "messages": ['):  # not JSON: not recorded
                    pass
            await proxy.state.drained()
            assert proxy.state.unrecorded == 1

    with caplog.at_level("WARNING", logger="promptkit.proxy"):
        run(main)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "not recorded" in said and "alt=json" in said
    assert "QKEY" not in said


def test_live_figures_hold_requests_within_a_byte_budget() -> None:
    """200 calls of 20,000 messages once held 1.3 GB idle: the held requests now fit max_held_bytes."""
    figures = LiveFigures(predict=True, max_held=64, max_held_bytes=100_000, max_pending=0)
    try:
        messages = [{"role": "user", "content": "y" * 100} for _ in range(200)]
        request = {"model": "gpt-4o", "messages": messages}
        size = _size(request)
        fit = 100_000 // size
        assert 25_000 < size < 40_000 and fit == 3
        for k in range(10):
            figures.observe({"request": request, "http": {"api": "openai-chat"}}, f"s{k}")
        assert figures.held_bytes() == fit * size
        assert figures.held_requests() == fit  # the 7 least recently active were released
        assert figures.snapshot()["released_requests"] == 10 - fit
        huge = {"model": "gpt-4o", "messages": [{"role": "user", "content": "z" * 200_000}]}
        figures.observe({"request": huge, "http": {"api": "openai-chat"}}, "big")  # over the whole budget
        assert figures.held_bytes() <= 100_000
    finally:
        figures.close()
