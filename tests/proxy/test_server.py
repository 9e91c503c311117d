"""The recording proxy against a fake upstream started by the tests (both APIs, streaming included)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from promptkit.analysis import analyze
from promptkit.formats import read_logs as load_log
from promptkit.proxy import ProxyConfig, ProxyConfigError, serve
from promptkit.proxy.server import LIVE_PATH
from tests.proxy import fake_upstream as fake
from tests.proxy.fake_upstream import fake_upstream

SECRET = "sk-ant-api03-" + "Z" * 40
HEADERS = {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET, "anthropic-version": "2023-06-01"}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "You are terse.",
                      "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are terse."},
                                                              {"role": "user", "content": "hi"}],
                              "stream_options": {"include_usage": True}}),
    ("/v1/responses", {"model": "gpt-5", "instructions": "You are terse.", "input": "hi"}),
]  # fmt: skip


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), timeout=120))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def fetch(
    session: aiohttp.ClientSession, url: str, payload: Any, headers: Any = None
) -> tuple[int, bytes, Any]:
    async with session.post(url, json=payload, headers=headers or HEADERS) as r:
        return r.status, await r.read(), r.headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(("path", "payload"), CASES, ids=["anthropic", "chat", "responses"])
def test_forwards_unchanged_and_records_whole(
    tmp_path: Path, path: str, payload: dict[str, Any], stream: bool
) -> None:
    payload = {**payload, "stream": stream}
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession(auto_decompress=False) as s:
                direct = await fetch(s, up.url + path + "?beta=true", payload)
                proxied = await fetch(s, proxy.url + path + "?beta=true", payload)
            assert proxied[0] == direct[0] == 200
            assert proxied[1] == direct[1]
            for name in ("Content-Type", "x-request-id", "Cache-Control"):
                assert proxied[2].get(name) == direct[2].get(name)
            sent_direct, sent_proxied = up.received
            assert sent_proxied["body"] == sent_direct["body"]
            assert sent_proxied["path"] == sent_direct["path"] == path + "?beta=true"
            assert dict(sent_proxied["headers"])["Authorization"] == f"Bearer {SECRET}"
            assert dict(sent_proxied["headers"])["x-api-key"] == SECRET

    run(main)
    text = log.read_text(encoding="utf-8")
    assert SECRET not in text
    assert "authorization" not in text.lower() and "x-api-key" not in text.lower()
    assert '"anthropic-version": "2023-06-01"' in text  # harmless headers are kept
    [rec] = records(log)
    assert rec["http"]["status"] == 200 and rec["http"]["stream"] is stream
    assert "error" not in rec
    assert rec["duration"] >= rec["first_byte"] >= 0
    assert rec["session"] == "session-1"
    response = rec["response"]
    if path == "/v1/messages":
        assert rec["request"] == payload
        assert response["content"][0]["text"].startswith("Answer ")
        assert response["content"][1]["input"] == {"query": "fox"}
        assert response["usage"]["output_tokens"] == 17 and "input_tokens" in response["usage"]
    elif path == "/v1/chat/completions":
        assert rec["request"] == payload
        assert response["choices"][0]["message"]["content"].startswith("Answer ")
        assert response["usage"]["completion_tokens"] == 12
    else:
        assert rec["original"]["request"] == payload
        assert [m["role"] for m in rec["request"]["messages"]] == ["system", "user"]
        assert response["choices"][0]["message"]["content"].startswith("Answer ")
        assert rec["original"]["response"]["usage"]["output_tokens"] == 12


def test_streamed_events_reach_the_client_before_the_upstream_finishes(tmp_path: Path) -> None:
    release = asyncio.Event

    async def main() -> None:
        from aiohttp import web

        gate = release()

        async def held(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"first"}}]}\n\n')
            await gate.wait()
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_post("/v1/chat/completions", held)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        try:
            async with serve(
                ProxyConfig(upstream=f"http://{host}:{port}", port=0, log=tmp_path / "l.jsonl")
            ) as proxy:
                async with aiohttp.ClientSession() as s:
                    async with s.post(
                        proxy.url + "/v1/chat/completions",
                        json={"model": "m", "messages": [], "stream": True},
                    ) as r:
                        first = await asyncio.wait_for(r.content.readuntil(b"\n\n"), timeout=20)
                        assert b"first" in first
                        assert not gate.is_set()  # the upstream is still holding the rest
                        gate.set()
                        rest = await r.read()
                        assert rest == b"data: [DONE]\n\n"
        finally:
            await runner.cleanup()

    run(main)
    [rec] = records(tmp_path / "l.jsonl")
    assert rec["response"]["choices"][0]["message"]["content"] == "first"


def test_sessions_from_header_metadata_and_prefix_affinity(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    a1 = {"model": "gpt-4o", "messages": [{"role": "user", "content": "task A"}]}
    b1 = {"model": "gpt-4o", "messages": [{"role": "user", "content": "task B"}]}
    a2 = {"model": "gpt-4o", "messages": [*a1["messages"], {"role": "assistant", "content": "ok"},
                                          {"role": "user", "content": "more A"}]}  # fmt: skip
    b2 = {"model": "gpt-4o", "messages": [*b1["messages"], {"role": "assistant", "content": "ok"},
                                          {"role": "user", "content": "more B"}]}  # fmt: skip
    other_tools = {**a2, "tools": [{"type": "function", "function": {"name": "f"}}]}
    cc = {"model": "claude-x", "max_tokens": 8, "metadata": {"user_id": "user_1_account__session_abc-123"},
          "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                chat = proxy.url + "/v1/chat/completions"
                for body in (a1, b1, b2, a2, other_tools):
                    assert (await fetch(s, chat, body))[0] == 200
                assert (await fetch(s, chat, a1, {"x-promptkit-session": "named"}))[0] == 200
                assert (await fetch(s, proxy.url + "/v1/messages", cc))[0] == 200

    run(main)
    sessions = [r["session"] for r in records(log)]
    assert sessions == ["session-1", "session-2", "session-2", "session-1", "session-3", "named", "abc-123"]
    assert sum(1 for r in load_log(log).records if r.session == "session-1") == 2


def test_live_figures_page_and_json(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    system = "You are a careful assistant. " * 400  # above the 1,024-token minimum of OpenAI's cache
    turn1 = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "q1"}],
    }
    turn2 = {"model": "gpt-4o", "messages": [*turn1["messages"], {"role": "assistant", "content": "a1"},
                                             {"role": "user", "content": "q2"}]}  # fmt: skip
    changed = {"model": "gpt-4o", "messages": [{"role": "system", "content": system + " Today is Monday."},
                                               *turn2["messages"][1:]]}  # fmt: skip

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                hdr = {"x-promptkit-session": "live"}
                for body in (turn1, turn2, changed):
                    assert (await fetch(s, proxy.url + "/v1/chat/completions", body, hdr))[0] == 200
                await asyncio.get_running_loop().run_in_executor(None, proxy.state.figures.wait, 60)
                async with s.get(proxy.url + LIVE_PATH + "/stats.json") as r:
                    stats = await r.json()
                async with s.get(proxy.url + LIVE_PATH + "/") as r:
                    page = await r.text()
                    assert r.status == 200 and r.content_type == "text/html"
                async with s.post(proxy.url + LIVE_PATH + "/stats.json", data=b"{}") as r:
                    assert r.status == 405
                async with s.delete(proxy.url + LIVE_PATH + "/") as r:
                    assert r.status == 405
            assert len(up.received) == 3  # the live endpoints are never forwarded

            [live] = [x for x in stats["sessions"] if x["session"] == "live"]
            usages = [r["response"]["usage"] for r in records(log)]
            assert live["reported_prompt_tokens"] == sum(u["prompt_tokens"] for u in usages)
            assert live["reported_cached_tokens"] == sum(
                u["prompt_tokens_details"]["cached_tokens"] for u in usages
            )
            assert live["requests"] == live["predicted_requests"] == 3
            assert live["predicted_hit_ratio"] is not None and live["predicted_cached_tokens"] > 0
            [brk] = live["last_breaks"]
            assert (brk["index"], brk["message"], brk["role"]) == (2, 0, "system")
            assert brk["lost_tokens"] > 0
            assert stats["recording"]["written"] == 3 and stats["recording"]["failures"] == 0
            assert "live" in page and "system" in page

    run(main)


def test_analyze_reads_the_proxy_log(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=log, predict=False)) as proxy,
        ):
            async with aiohttp.ClientSession() as s:
                for path, payload in CASES:
                    for stream in (False, True):
                        assert (await fetch(s, proxy.url + path, {**payload, "stream": stream}))[0] == 200

    run(main)
    loaded = load_log(log)
    assert len(loaded.records) == 6 and not loaded.problems
    assert all(r.usage is not None and r.usage.prompt_tokens for r in loaded.records)
    assert all(r.completion is not None for r in loaded.records)
    result = analyze(log, provider="openai")
    assert result.requests.height == 6


def test_redaction_patterns_and_secret_query_values(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "my card is 4111-1111-1111-1111, key sk-proj-" + "qQ1" * 10}],
    }

    async def main() -> None:
        config = ProxyConfig(upstream=up_url[0], port=0, log=log, redact=(r"\d{4}-\d{4}-\d{4}-\d{4}",))
        async with serve(config) as proxy, aiohttp.ClientSession() as s:
            status, _answer, _ = await fetch(s, proxy.url + "/v1/chat/completions?api_key=hunter2", body)
            assert status == 200

    up_url: list[str] = []

    async def outer() -> None:
        async with fake_upstream() as up:
            up_url.append(up.url)
            await main()
            assert b"4111-1111-1111-1111" in up.received[0]["body"]  # what is sent is never changed

    run(outer)
    text = log.read_text(encoding="utf-8")
    assert "4111-1111-1111-1111" not in text and "sk-proj-" not in text and "hunter2" not in text
    rec = records(log)[0]
    assert rec["request"]["messages"][0]["content"] == "my card is [REDACTED], key [REDACTED]"
    assert os.stat(log).st_mode & 0o077 == 0  # the log is readable by its owner only


def test_listens_on_loopback_only_unless_asked() -> None:
    with pytest.raises(ProxyConfigError, match="not a loopback address"):
        ProxyConfig(upstream="https://api.openai.com", host="0.0.0.0")
    assert ProxyConfig(upstream="https://api.openai.com", host="0.0.0.0", allow_remote=True).host == "0.0.0.0"
    assert ProxyConfig(upstream="https://api.openai.com", host="::1").listen_url == "http://[::1]:8787"
    with pytest.raises(ProxyConfigError, match="upstream"):
        ProxyConfig(upstream="api.openai.com")


# ---------------------------------------------------------------------------------------------------
# faults


def test_upstream_5xx_and_4xx_pass_through_and_are_recorded(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                for model in ("fail-503", "fail-400"):
                    body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
                    direct = await fetch(s, up.url + "/v1/chat/completions", body)
                    proxied = await fetch(s, proxy.url + "/v1/chat/completions", body)
                    assert proxied[:2] == direct[:2] and proxied[0] in (503, 400)

    run(main)
    first, second = records(log)
    assert first["error"]["kind"] == "http-status" and first["error"]["status"] == 503
    assert first["error"]["body"]["error"]["type"] == "overloaded_error"
    assert "response" not in first
    assert second["error"]["status"] == 400


@pytest.mark.slow
def test_upstream_timeout_is_a_504_and_recorded(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up:
            config = ProxyConfig(upstream=up.url, port=0, log=log, read_timeout=fake.SLOW_SECONDS / 6)
            async with serve(config) as proxy, aiohttp.ClientSession() as s:
                status, body, _ = await fetch(
                    s, proxy.url + "/v1/messages", {"model": "slow", "messages": []}
                )
                assert status == 504
                assert json.loads(body)["error"]["type"] == "proxy_upstream_timeout"

    run(main)
    [rec] = records(log)
    assert rec["error"]["kind"] == "timeout" and rec["http"]["status"] is None


def test_unreachable_upstream_is_a_502_and_recorded(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        import socket

        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        async with serve(ProxyConfig(upstream=f"http://127.0.0.1:{port}", port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                status, body, _ = await fetch(
                    s, proxy.url + "/v1/chat/completions", {"model": "m", "messages": []}
                )
                assert status == 502 and b"proxy_upstream_unreachable" in body

    run(main)
    assert records(log)[0]["error"]["kind"] == "connection"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_connection_dropped_mid_response_is_passed_on_and_recorded(tmp_path: Path, stream: bool) -> None:
    log = tmp_path / "calls.jsonl"
    body = {"model": "drop", "stream": stream, "messages": [{"role": "user", "content": "x"}]}

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            for base in (up.url, proxy.url):
                async with aiohttp.ClientSession() as s:
                    with pytest.raises(aiohttp.ClientPayloadError):
                        async with s.post(base + "/v1/messages", json=body) as r:
                            assert r.status == 200
                            await r.read()

    run(main)
    [rec] = records(log)
    assert rec["error"]["kind"] == "stream-dropped"
    assert "response" not in rec
    if stream:  # what arrived before the drop is kept
        assert rec["error"]["partial_response"]["content"][0]["text"].startswith("Answer")


def test_log_write_failure_keeps_forwarding_and_is_reported(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "calls.jsonl"
    log.mkdir()  # a directory: every write fails

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                for k in range(3):
                    status, _, _ = await fetch(
                        s,
                        proxy.url + "/v1/chat/completions",
                        {"model": "m", "messages": [{"role": "user", "content": str(k)}]},
                    )
                    assert status == 200
                    if k == 1:
                        log.rmdir()  # the disk is back
                async with s.get(proxy.url + LIVE_PATH + "/stats.json") as r:
                    stats = await r.json()
                async with s.get(proxy.url + LIVE_PATH + "/") as r:
                    page = await r.text()
        assert stats["recording"]["failures"] == 2 and stats["recording"]["written"] == 1
        assert "Is a directory" in stats["recording"]["last_error"]
        assert "RECORDING FAILED" in page

    run(main)
    assert "RECORDING FAILED" in capfd.readouterr().err
    [rec] = records(log)
    assert rec["request"]["messages"][0]["content"] == "2"


def test_records_are_never_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptkit import capture

    log = capture.RecordLog(tmp_path / "calls.jsonl")
    assert log.append({"request": {"messages": [{"role": "user", "content": "one"}]}})
    real_write = os.write
    calls = {"n": 0}

    def short_write(fd: int, data: bytes) -> int:
        calls["n"] += 1
        return real_write(fd, data[: len(data) // 2])  # the disk fills up mid-record

    monkeypatch.setattr(capture.os, "write", short_write)
    assert not log.append({"request": {"messages": [{"role": "user", "content": "two " * 100}]}})
    monkeypatch.setattr(capture.os, "write", real_write)
    assert log.append({"request": {"messages": [{"role": "user", "content": "three"}]}})
    assert calls["n"] == 1 and log.failures == 1
    loaded = load_log(tmp_path / "calls.jsonl")
    assert [r.request["messages"][0]["content"] for r in loaded.records] == ["one", "three"]
    assert not loaded.problems


def test_a_torn_last_line_is_reported_by_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    whole = json.dumps({"request": {"messages": [{"role": "user", "content": "one"}]}})
    path.write_text(whole + "\n" + whole[:25], encoding="utf-8")  # a crash mid-write of another writer
    loaded = load_log(path)
    assert len(loaded.records) == 1
    [problem] = loaded.problems
    assert problem.line == 2 and "invalid JSON" in problem.reason


# ---------------------------------------------------------------------------------------------------
# load


@pytest.mark.slow
def test_load_200_concurrent_requests_half_streaming(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    n = 200
    bodies = []
    for k in range(n):
        path, base = CASES[k % 3]
        payload = json.loads(json.dumps(base))
        payload["messages" if "messages" in payload else "input"] = (
            [{"role": "user", "content": f"request {k}"}] if "messages" in payload else f"request {k}"
        )
        payload["stream"] = k % 2 == 0
        bodies.append((path, payload))

    async def main() -> None:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=log, predict=False)) as proxy,
        ):
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as s:
                direct = await asyncio.gather(*(fetch(s, up.url + p, b) for p, b in bodies))
                proxied = await asyncio.gather(*(fetch(s, proxy.url + p, b) for p, b in bodies))
            for k, ((s1, b1, _), (s2, b2, _)) in enumerate(zip(direct, proxied, strict=True)):
                assert s1 == s2 == 200, k
                assert b1 == b2, k

    run(main)
    lines = log.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    recs = [json.loads(line) for line in lines[:-1]]
    assert len(recs) == n
    assert sum(r["http"]["stream"] for r in recs) == n // 2
    assert all("error" not in r and r["response"]["usage"] for r in recs)
    seen = sorted(re.search(r"request (\d+)", json.dumps(r["request"])).group(1) for r in recs)  # type: ignore[union-attr]
    assert seen == sorted(str(k) for k in range(n))
