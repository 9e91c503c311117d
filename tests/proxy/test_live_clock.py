"""Tests for the cache clock of promptkit/proxy/live.py: ``stats.json`` carries each session's expiry, and
the live page counts the time left down in a real browser (headless Chromium, as tests/report/test_html.py
runs it: ``apt-get install -y chromium``)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from promptkit.proxy import ProxyConfig, serve
from promptkit.proxy.live import LiveFigures, render_page
from promptkit.proxy.server import LIVE_PATH
from tests.proxy.fake_upstream import fake_upstream

CHROMIUM = shutil.which("chromium")
INSTALL = "apt-get update && apt-get install -y chromium"
RECORDING = {"written": 0, "failures": 0, "last_error": None}


def _record(at: float, model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": at, "request": {"model": model, "messages": []}, "response": {"usage": usage}}


def _anthropic(read: int, five: int, hour: int) -> dict[str, Any]:
    return {"input_tokens": 5, "cache_read_input_tokens": read, "cache_creation_input_tokens": five + hour,
            "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour},
            "output_tokens": 20}  # fmt: skip


def _figures(base: float) -> LiveFigures:
    """Four sessions: 5-minute writes last used at ``base``, 1-hour writes at ``base``, an OpenAI
    session at ``base`` (10 minutes), and 5-minute writes last used 400 s before ``base``."""
    figures = LiveFigures(predict=False)
    figures.observe(_record(base - 30, "claude-opus-4-6", _anthropic(0, 9000, 0)), "five")
    figures.observe(_record(base, "claude-opus-4-6", _anthropic(9000, 300, 0)), "five")
    figures.observe(_record(base, "claude-opus-4-6", _anthropic(0, 0, 9000)), "hour")
    figures.observe(
        _record(base, "gpt-4o", {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}}),
        "openai",
    )
    figures.observe(_record(base - 430, "claude-opus-4-6", _anthropic(0, 9000, 0)), "stale")
    figures.observe(_record(base - 400, "claude-opus-4-6", _anthropic(2000, 700, 0)), "stale")
    return figures


def test_stats_carry_each_sessions_expiry_and_time_left() -> None:
    base = 1_770_000_000.0
    sessions = {s["session"]: s for s in _figures(base).snapshot(now=base + 100)["sessions"]}
    five, hour, openai, stale = (sessions[k] for k in ("five", "hour", "openai", "stale"))
    assert (five["cache_expires_at"], five["cache_seconds_left"], five["cache_expired"]) == (
        base + 300,
        200.0,
        False,
    )
    assert (hour["cache_ttl_seconds"], hour["cache_seconds_left"]) == (3600.0, 3500.0)
    assert (openai["cache_ttl_seconds"], openai["cache_seconds_left"]) == (600.0, 500.0)
    assert (stale["cache_seconds_left"], stale["cache_expired"]) == (0.0, True)
    assert stale["last_miss_cause"] == "history_rewritten" and five["last_miss_cause"] is None
    assert _figures(base).snapshot(now=base + 300)["sessions"][0]["cache_expired"] is True


def test_a_session_without_usage_or_time_has_no_clock() -> None:
    figures = LiveFigures(predict=False)
    figures.observe({"request": {"model": "claude-opus-4-6", "messages": []}, "response": {}}, "none")
    figures.observe(
        {"request": {"model": "claude-opus-4-6"}, "response": {"usage": _anthropic(0, 900, 0)}}, "untimed"
    )
    for s in figures.snapshot(now=0.0)["sessions"]:
        assert (s["cache_expires_at"], s["cache_seconds_left"], s["cache_expired"]) == (None, None, False)
    page = render_page(figures.snapshot(), upstream="u", log=None, recording=RECORDING)
    assert "data-expires-at='" not in page and page.count("<td>–</td>") >= 2


class _Clocks(HTMLParser):
    """The text and class of every element carrying ``data-expires-at``, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, Any]] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "data-expires-at" in a:
            self.found.append(
                {"expires": float(a["data-expires-at"] or 0), "class": a.get("class"), "text": ""}
            )
            self._open = True

    def handle_endtag(self, tag: str) -> None:
        self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            self.found[-1]["text"] += data


def _seconds(text: str) -> int:
    match = re.fullmatch(r"(?:(\d+):)?(\d+):(\d\d) left", text)
    assert match, text
    h, m, s = (int(g or 0) for g in match.groups())
    return 3600 * h + 60 * m + s


@pytest.mark.slow
def test_the_live_page_counts_the_time_left_down_in_the_browser(tmp_path: Path) -> None:
    """The page is rendered from a snapshot 60 s old (its own text says 60 s more than is left); after
    the page's script ran, Chromium's DOM shows the time left from the server's expiry time and the
    browser's clock, and "expired" for the session whose cache is past."""
    assert CHROMIUM is not None, f"the browser test needs headless Chromium: {INSTALL}"
    base = time.time() - 100.0
    figures = _figures(base)
    page = tmp_path / "live.html"
    page.write_text(render_page(figures.snapshot(now=base + 40), upstream="u", log=None, recording=RECORDING))
    served = _Clocks()
    served.feed(page.read_text())
    assert served.found[0]["text"] == "4:20 left"  # the server's text, as of the snapshot
    before = time.time()
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'p'}",
         "--virtual-time-budget=1500", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout  # fmt: skip
    after = time.time()
    shown = _Clocks()
    shown.feed(dom)
    five, hour, openai, stale = shown.found
    for clock, expires in ((five, base + 300), (hour, base + 3600), (openai, base + 600)):
        assert clock["expires"] == pytest.approx(expires) and clock["class"] == "clock"
        left = _seconds(clock["text"])
        # what the browser's clock gave between the run's start and end (virtual time may run ahead)
        assert expires - after - 3 <= left <= expires - before, (clock, before, after)
    assert _seconds(five["text"]) < 200  # not the stale server text (260 s)
    assert re.fullmatch(r"5\d:\d\d left", hour["text"])
    assert (stale["text"], stale["class"]) == ("expired", "clock expired")


@pytest.mark.slow
def test_the_countdown_turns_to_expired_in_the_browser(tmp_path: Path) -> None:
    """A cache with 2 s left when served reads "expired" once the browser's clock has passed it."""
    assert CHROMIUM is not None, f"the browser test needs headless Chromium: {INSTALL}"
    now = time.time()
    figures = LiveFigures(predict=False)
    figures.observe(_record(now - 298.0, "claude-opus-4-6", _anthropic(0, 9000, 0)), "ending")
    page = tmp_path / "live.html"
    page.write_text(render_page(figures.snapshot(now=now), upstream="u", log=None, recording=RECORDING))
    assert "0:02 left" in page.read_text()
    time.sleep(max(0.0, now + 2.5 - time.time()))
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'p'}",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout  # fmt: skip
    shown = _Clocks()
    shown.feed(dom)
    [clock] = shown.found
    assert (clock["text"], clock["class"]) == ("expired", "clock expired")


def test_the_proxys_stats_json_and_page_carry_the_clock(tmp_path: Path) -> None:
    """Through the running proxy: the session's expiry is its recorded call's time plus the provider's
    lifetime (OpenAI: 10 minutes), and the page holds the countdown."""
    log = tmp_path / "calls.jsonl"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}

    async def main() -> tuple[dict[str, Any], str]:
        async with (
            fake_upstream() as up,
            serve(ProxyConfig(upstream=up.url, port=0, log=log, predict=False)) as proxy,
        ):
            async with aiohttp.ClientSession() as s:
                headers = {"Authorization": "Bearer sk-test", "x-promptkit-session": "clocked"}
                async with s.post(proxy.url + "/v1/chat/completions", json=body, headers=headers) as r:
                    assert r.status == 200
                    await r.read()  # the whole answer: its call is then recorded (or being recorded)
                async with s.get(proxy.url + LIVE_PATH + "/stats.json") as r:
                    stats = await r.json()
                async with s.get(proxy.url + LIVE_PATH + "/") as r:
                    return stats, await r.text()

    stats, page = asyncio.run(asyncio.wait_for(main(), timeout=120))
    [recorded] = [json.loads(line) for line in log.read_text().splitlines()]
    [session] = stats["sessions"]
    assert session["cache_expires_at"] == pytest.approx(recorded["timestamp"] + 600.0)
    assert session["cache_ttl_seconds"] == 600.0 and session["cache_expired"] is False
    assert 0 < session["cache_seconds_left"] <= 600.0 and stats["now"] >= recorded["timestamp"]
    assert f"data-expires-at='{session['cache_expires_at']!r}'" in page and "promptkitTick" in page
