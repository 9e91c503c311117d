"""A local fake LLM API for the proxy and capture tests: Anthropic Messages, OpenAI Chat Completions and
Responses, streaming included, with fault modes chosen by the request's ``model``.

Every answer is a pure function of the request body (no clocks, no random ids), so an answer received
through the proxy can be compared byte for byte with one received directly.

Fault models: ``fail-503`` (a 503 with a JSON error), ``fail-400``, ``slow`` (answers after
``SLOW_SECONDS``), ``drop`` (the connection is closed mid-body), ``gzip`` (a gzip-encoded JSON answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from aiohttp import web

SLOW_SECONDS = 3.0
_RECEIVED = web.AppKey("received", list)


def _usage_numbers(body: bytes, payload: dict[str, Any]) -> tuple[int, int]:
    prompt = max(1, len(body) // 4)
    n = len(payload.get("messages") or payload.get("input") or [])
    cached = (prompt // 2 // 64) * 64 if n > 1 else 0
    return prompt, cached


def _answer_text(payload: dict[str, Any]) -> str:
    seen = {k: payload.get(k) for k in ("model", "system", "messages", "instructions", "input")}
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()
    return f"Answer {digest[:8]}: the quick brown fox jumps over the lazy dog, 東京 ✓."


def _pieces(text: str, n: int = 6) -> list[str]:
    size = max(1, len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> list[bytes]:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out.append(((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode())
    return out


def anthropic_events(payload: dict[str, Any], prompt: int, cached: int) -> list[bytes]:
    text = _answer_text(payload)
    mid = f"msg_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    usage = {"input_tokens": prompt - cached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
             "output_tokens": 1}  # fmt: skip
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("message_start", {"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
            "model": payload.get("model"), "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
    ]  # fmt: skip
    for piece in _pieces(text):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": piece}}))  # fmt: skip
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "fo'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'x"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 17}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return _sse(events)


def anthropic_message(payload: dict[str, Any], prompt: int, cached: int) -> dict[str, Any]:
    text = _answer_text(payload)
    return {
        "id": f"msg_{hashlib.sha256(text.encode()).hexdigest()[:12]}", "type": "message", "role": "assistant",
        "model": payload.get("model"),
        "content": [{"type": "text", "text": text},
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"query": "fox"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": cached, "output_tokens": 17},
    }  # fmt: skip


def chat_events(payload: dict[str, Any], prompt: int, cached: int) -> list[bytes]:
    text = _answer_text(payload)
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1775786368,
        "model": payload.get("model"),
    }
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (
            None,
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                ],
            },
        )
    ]
    for piece in _pieces(text):
        events.append(
            (None, {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        )
    events.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    if (payload.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt + 12,
                 "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip
        events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return _sse(events)


def chat_completion(payload: dict[str, Any], prompt: int, cached: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1775786368, "model": payload.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": _answer_text(payload)},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt + 12,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }  # fmt: skip


def responses_body(payload: dict[str, Any], prompt: int, cached: int) -> dict[str, Any]:
    return {
        "id": "resp_1", "object": "response", "created_at": 1775786368, "status": "completed",
        "model": payload.get("model"),
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": _answer_text(payload), "annotations": []}]}],
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens": 12, "total_tokens": prompt + 12},
    }  # fmt: skip


def responses_events(payload: dict[str, Any], prompt: int, cached: int) -> list[bytes]:
    final = responses_body(payload, prompt, cached)
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": created})
    ]
    for i, piece in enumerate(_pieces(_answer_text(payload))):
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": i + 1,
                       "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece}))  # fmt: skip
    events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                  "item": final["output"][0]}))  # fmt: skip
    events.append(("response.completed", {"type": "response.completed", "response": final}))
    return _sse(events)


async def _handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    request.app[_RECEIVED].append({"method": request.method, "path": request.path_qs,
                                   "headers": list(request.headers.items()), "body": body})  # fmt: skip
    if request.method == "GET":
        return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})
    try:
        payload = json.loads(body)
    except RecursionError:  # a body nested deeper than Python parses: answered as a plain call
        payload = {"model": "deep", "messages": []}
    model = str(payload.get("model", ""))
    prompt, cached = _usage_numbers(body, payload)
    if model == "fail-503":
        return web.json_response(
            {"error": {"type": "overloaded_error", "message": "upstream overloaded"}}, status=503
        )
    if model == "fail-400":
        return web.json_response(
            {"error": {"type": "invalid_request_error", "message": "bad field"}}, status=400
        )
    if model == "slow":
        await asyncio.sleep(SLOW_SECONDS)
    path = request.path
    stream = bool(payload.get("stream"))
    if path.endswith("/messages"):
        events, whole = anthropic_events, anthropic_message
    elif path.endswith("/chat/completions"):
        events, whole = chat_events, chat_completion
    elif path.endswith("/responses"):
        events, whole = responses_events, responses_body
    else:
        return web.json_response({"error": {"message": f"no route {path}"}}, status=404)
    if stream:
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                           "Cache-Control": "no-cache", "x-request-id": "req_fake"})  # fmt: skip
        await response.prepare(request)
        chunks = events(payload, prompt, cached)
        for k, chunk in enumerate(chunks):
            if model == "drop" and k == len(chunks) // 2:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(chunk)
            await asyncio.sleep(0)
        await response.write_eof()
        return response
    data = json.dumps(whole(payload, prompt, cached), ensure_ascii=False).encode()
    if model == "gzip":
        return web.Response(body=gzip.compress(data), headers={"Content-Type": "application/json",
                                                               "Content-Encoding": "gzip"})  # fmt: skip
    if model == "drop":
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        assert request.transport is not None
        request.transport.close()
        return response
    return web.Response(body=data, headers={"Content-Type": "application/json", "x-request-id": "req_fake"})


def make_app() -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[_RECEIVED] = []
    app.router.add_route("*", "/{tail:.*}", _handle)
    return app


class Upstream:
    """A running fake upstream: its ``url`` and the requests it ``received``."""

    def __init__(self, url: str, app: web.Application) -> None:
        self.url = url
        self.app = app

    @property
    def received(self) -> list[dict[str, Any]]:
        return self.app[_RECEIVED]


@contextlib.asynccontextmanager
async def fake_upstream() -> AsyncIterator[Upstream]:
    """Run the fake upstream on 127.0.0.1 (a free port) in the current loop."""
    app = make_app()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield Upstream(f"http://{host}:{port}", app)
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def upstream_thread() -> Iterator[Upstream]:
    """Run the fake upstream in a background thread (for synchronous clients)."""
    ready = threading.Event()
    holder: dict[str, Any] = {}
    loop = asyncio.new_event_loop()

    async def main() -> None:
        async with fake_upstream() as up:
            holder["up"] = up
            holder["stop"] = asyncio.Event()
            ready.set()
            await holder["stop"].wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("fake upstream did not start")
    try:
        yield holder["up"]
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(10)
        loop.close()
