"""The proxy against a hostile or careless client: web pages (CSRF, DNS rebinding), ``Expect:
100-continue``, a client that never finishes its body, an answer too large to keep, a recording too slow to
run on the event loop. Every server here listens on 127.0.0.1 and every test stops by itself."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import pytest

import promptkit.proxy.server as server
from promptkit.proxy import ProxyConfig, serve
from tests.proxy.fake_upstream import fake_upstream
from tests.proxy.test_server import records, run

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://evil.example"}, 403),  # a web page's cross-site POST (CSRF)
        ({"Origin": "null"}, 403),  # a sandboxed frame or a file:// page
        ({"Host": "evil.example"}, 403),  # DNS rebinding: the page's own name, resolved to 127.0.0.1
        ({"Host": "evil.example:8787", "Origin": "http://evil.example:8787"}, 403),
        ({"Origin": "http://127.0.0.1:3000"}, 200),  # a local tool's page
        ({"Origin": "http://localhost:5173", "Host": "localhost"}, 200),
        ({"Host": "[::1]:8787"}, 200),
        ({}, 200),  # an API client: neither header of a browser
    ],
)
def test_web_pages_are_refused_and_api_clients_pass(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
                    assert r.status == status
                    body = await r.json()
            await proxy.state.drained()
            if status == 403:
                assert body["error"]["source"] == "promptkit-proxy"
                assert up.received == []  # never forwarded with the user's credentials
                assert proxy.state.refused == 1 and proxy.state.forwarded == 0
            else:
                assert len(up.received) == 1 and proxy.state.refused == 0

    run(main)
    assert len(records(log) if log.exists() else []) == (1 if status == 200 else 0)


def test_a_remote_proxy_accepts_other_host_names_but_not_web_pages(tmp_path: Path) -> None:
    async def main() -> None:
        config = ProxyConfig(
            upstream="http://127.0.0.1:9", port=0, log=None, host="127.0.0.1", allow_remote=True
        )
        async with fake_upstream() as up:
            config = ProxyConfig(upstream=up.url, port=0, log=None, allow_remote=True)
            async with serve(config) as proxy, aiohttp.ClientSession() as s:
                async with s.post(
                    proxy.url + "/v1/chat/completions", json=CHAT, headers={"Host": "gpu-box.lan"}
                ) as r:
                    assert r.status == 200
                # the upstream gets its own host name, never the one the client addressed the proxy by
                [sent] = [v for k, v in up.received[0]["headers"] if k.lower() == "host"]
                assert sent == up.url.removeprefix("http://")
                async with s.post(
                    proxy.url + "/v1/chat/completions", json=CHAT, headers={"Origin": "https://evil.example"}
                ) as r:
                    assert r.status == 403

    run(main)


def test_expect_100_continue_is_answered_here_and_not_sent_upstream(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=None, read_timeout=5)) as proxy,
        ):
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT, expect100=True) as r:
                    assert r.status == 200
                    assert (await r.json())["choices"]
            assert "expect" not in {k.lower() for k, _ in up.received[0]["headers"]}

    run(main)


@pytest.mark.slow
def test_a_client_that_never_finishes_its_body_gets_408_and_holds_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=None, client_timeout=0.3)) as proxy,
        ):
            host, port = proxy.url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"model": '
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.read(200), timeout=10)
            writer.close()
            assert head.startswith(b"HTTP/1.1 408"), head
            assert up.received == [] and proxy.state.refused == 1

    run(main)


def test_recording_runs_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large body is parsed, redacted and written on the recording thread: the loop keeps serving."""
    seen: list[str] = []
    real = server._record

    def spy(*args: Any, **kw: Any) -> None:
        seen.append(threading.current_thread().name)
        real(*args, **kw)

    monkeypatch.setattr(server, "_record", spy)

    async def main() -> None:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=tmp_path / "l.jsonl")) as proxy,
        ):
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                    await r.read()
            # the whole answer of known length is sent only once the call is recorded
            assert proxy.state.log is not None and proxy.state.log.written == 1

    run(main)
    assert seen and all(name.startswith("promptkit-recorder") for name in seen), seen


def test_an_answer_too_large_to_keep_is_relayed_whole_and_recorded_without_its_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "MAX_RECORDED_RESPONSE", 64)
    log = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with fake_upstream() as up, serve(ProxyConfig(upstream=up.url, port=0, log=log)) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                    answer = await r.json()  # whole: the client is not cut off
            assert answer["choices"][0]["message"]["content"]

    run(main)
    (rec,) = records(log)
    assert rec["error"]["kind"] == "too-large" and "64" in rec["error"]["message"]
    assert "response" not in rec or not rec["response"]


@pytest.mark.slow
def test_slow_sockets_are_closed_and_bounded_while_a_caller_is_served(tmp_path: Path) -> None:
    """Slowloris: sockets that send a byte of a head now and then. A socket without its first head after
    header_timeout is closed; past max_connections a new one is closed at once; a real caller gets through.
    Bounded: 12 sockets, on 127.0.0.1, a few seconds."""

    async def main() -> None:
        config = ProxyConfig(
            upstream="http://127.0.0.1:9", port=0, log=None, header_timeout=1.5, max_connections=8
        )
        async with fake_upstream() as up:
            config = attrs.evolve(config, upstream=up.url)
            async with serve(config) as proxy:
                host, port = proxy.url.removeprefix("http://").split(":")
                slow = [await asyncio.open_connection(host, int(port)) for _ in range(12)]
                for _, writer in slow:
                    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
                await asyncio.sleep(0.2)
                closed_at_once = sum(await asyncio.gather(*(_closed(reader, 0.3) for reader, _ in slow)))
                assert closed_at_once == 4  # 12 sockets for 8 places
                assert proxy.state.refused == 4
                await asyncio.sleep(1.5)  # past header_timeout: every slow socket is closed
                assert all(await asyncio.gather(*(_closed(reader, 1.0) for reader, _ in slow)))
                assert proxy.state.refused == 12
                async with aiohttp.ClientSession() as s:  # the places are free again: a caller is served
                    async with s.post(proxy.url + "/v1/chat/completions", json=CHAT) as r:
                        assert r.status == 200
                for _, writer in slow:
                    writer.close()

    run(main)


async def _closed(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), timeout=within) == b""
    except TimeoutError:
        return False
