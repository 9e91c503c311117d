"""Tests for promptkit/report/html.py: the self-contained HTML report, rendered in a real browser.

The browser tests run Debian's headless Chromium (``apt-get install -y chromium``; CI installs it).
Each test renders a report, lets Chromium load it from disk, and checks the DOM after the page's own
script ran (``--dump-dom``) and a screenshot (``--screenshot``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from promptkit.analysis import analyze, analyze_requests
from promptkit.report import hit_ratio_summary
from promptkit.report.causes import lost_by_cause
from promptkit.report.html import PAGE_ROWS, TIMELINE_POINTS, render_html, write_html

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
#: How the test setup installs the browser (Debian); the browser tests fail, naming it, without it.
INSTALL = "apt-get update && apt-get install -y chromium"

EVIL = "<script>document.title='PWNED';window.pwned=1</script><img src=x onerror=\"document.title='IMG'\">"


# ------------------------------------------------------------------------------------------- inputs


def _write_log(path: Path) -> None:
    """Two sessions of a growing conversation with usage; a per-turn block before the history makes
    every later call diverge, and its text carries markup that must never run."""
    lines = []
    for session, turns in (("support <b>42</b>", 5), ("billing", 3)):
        history: list[dict[str, str]] = []
        for turn in range(turns):
            messages = [
                {"role": "system", "content": "You are a support assistant for Acme. " * 30},
                {"role": "system", "content": f"Retrieved note {turn}: {EVIL} customer prefers email."},
                *history,
                {"role": "user", "content": f"Question {turn}: where is order {1000 + turn}?"},
            ]
            answer = {"role": "assistant", "content": f"Order {1000 + turn} ships tomorrow."}
            usage = {"prompt_tokens": 400 + 30 * turn, "completion_tokens": 9}
            usage |= {"prompt_tokens_details": {"cached_tokens": 256 if turn else 0}}
            lines.append(
                json.dumps(
                    {
                        "session": session,
                        "timestamp": 1_700_000_000 + 60 * turn,
                        "request": {"model": "gpt-4o-mini", "messages": messages},
                        "response": {"choices": [{"message": answer}], "usage": usage},
                    }
                )
            )
            history += [messages[-1], answer]
    lines.append("{not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("log") / "calls.jsonl"
    _write_log(log)
    return analyze(log, provider="exact")


def _big_frame(requests: int = 10_000, sessions: int = 200) -> pl.DataFrame:
    """A requests frame shaped like the engine's: one long session and many short ones."""
    schema = analyze_requests([], provider="exact").requests.schema  # the engine's columns and types
    long = requests // 2
    rows = []
    for k in range(requests):
        session, index = (
            ("long", k) if k < long else (f"s{(k - long) % sessions:03d}", (k - long) // sessions)
        )
        prompt = 2000 + 10 * index
        cached = 0 if index == 0 else (prompt - 300 if k % 7 else 64)
        diverged = index > 0 and k % 7 == 0
        rows.append(
            {
                "session": session,
                "index": index,
                "timestamp": float(k),
                "prompt_tokens": prompt,
                "prefix_tokens": cached,
                "predicted_cached_tokens": cached,
                "hit_ratio": cached / prompt,
                "reported_prompt_tokens": prompt,
                "reported_cached_tokens": max(0, cached - 64),
                "divergence_message": 1 if diverged else None,
                "divergence_role": "system" if diverged else None,
                "divergence_token": cached if diverged else None,
                "divergence_cached_text": "old memory text" if diverged else None,
                "divergence_prompt_text": "new memory text" if diverged else None,
            }
        )
    return pl.DataFrame(rows, schema=schema).with_columns(
        # miss causes as another module adds them: any lost_<cause> column is shown
        pl.when(pl.col("divergence_token").is_not_null())
        .then(pl.col("prompt_tokens") - pl.col("predicted_cached_tokens"))
        .otherwise(0)
        .alias("lost_prefix_edit"),
        pl.when(pl.col("index") == 0).then(pl.col("prompt_tokens")).otherwise(0).alias("lost_cold_start"),
    )


# ------------------------------------------------------------------------------------- browser


def _chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, f"the browser tests need headless Chromium: {INSTALL}"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *extra,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


class _Dom(HTMLParser):
    """Text by element id, table rows by table id (with their inline style), and the title."""

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[str, str] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._open: list[tuple[str, str | None]] = []  # (tag, id) of open elements
        self._table: str | None = None
        self.title = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("id")
        if tag == "tr" and self._table is not None:
            self.rows.setdefault(self._table, []).append({"style": a.get("style") or "", "cells": []})
        if tag in ("td", "th") and self._table and self.rows.get(self._table):
            self.rows[self._table][-1]["cells"].append("")
        if tag not in ("br", "img", "input", "meta", "circle", "path", "line", "rect"):
            self._open.append((tag, a.get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            opened, _ = self._open.pop()
            if opened == tag:
                break
        if tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        for _, ident in self._open:
            if ident:
                self.text[ident] = self.text.get(ident, "") + data
        if self._open and self._open[-1][0] == "title":
            self.title += data
        if self._table and self.rows.get(self._table) and self.rows[self._table][-1]["cells"]:
            self.rows[self._table][-1]["cells"][-1] += data


def _dom(page: Path, profile: Path) -> _Dom:
    parser = _Dom()
    parser.feed(_chromium(page, profile, "--dump-dom").stdout)
    return parser


def _png_colours(path: Path) -> tuple[tuple[int, int], int]:
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        return rgb.size, len(colours) if colours is not None else 1 << 20


# ---------------------------------------------------------------------------------------- tests


def test_page_is_self_contained(result: Any) -> None:
    page = render_html(result)
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched: no src/href other than in-page anchors, no CSS url()/@import, no <link>
    assert not re.findall(r"\b(?:src|href)\s*=\s*[\"'](?!#)", page.replace(html.escape(EVIL), ""))
    assert "<link" not in page and "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page  # the page forbids itself any network access


def test_log_text_is_escaped_in_the_source(result: Any) -> None:
    page = render_html(result)
    assert "<script>document.title" not in page and "<img src=x" not in page
    text = re.sub(r"</?span[^>]*>", "", page)  # the excerpts are cut into one span per token
    assert "&lt;script&gt;document.title=" in text  # shown, as text, in the largest breaks
    assert "support &lt;b&gt;42&lt;/b&gt;" in page and "<b>42</b>" not in page
    # the embedded JSON cannot close its script element
    data = page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and json.loads(data)["timelines"]["support <b>42</b>"]["n"] == 5


def test_the_tables_hold_the_analysis_figures(result: Any) -> None:
    page = render_html(result)
    assert f'data-value="{result.hit_ratio}"' in page
    # every session has a row; largest breaks name the slot of the divergence
    for session in result.requests["session"].unique():
        assert f"<td>{html.escape(session)}</td>" in page
    assert page.count('class="break"') == min(
        20, result.requests.filter(pl.col("divergence_token").is_not_null()).height
    )
    # the causes of the analysis (promptkit.report.causes) are shown by name
    from promptkit.report.causes import causes_by_cause

    for cause, tokens in causes_by_cause(result).select("cause", "tokens_lost").rows():
        assert f"<td>{cause}</td>" in page and f"{tokens:,}" in page


def test_loss_by_cause_reads_every_lost_column() -> None:
    frame = _big_frame(700, 10)
    table = lost_by_cause(frame)
    assert set(table["cause"]) == {"prefix_edit", "cold_start"}
    for row in table.iter_rows(named=True):
        column = frame[f"lost_{row['cause']}"]
        assert row["tokens_lost"] == column.sum() and row["requests"] == (column > 0).sum()
    assert table["share"].sum() == pytest.approx(1.0)
    page = render_html(frame)
    assert "By cause" in page and "prefix_edit" in page


def test_ten_thousand_requests_stay_small_and_paged(tmp_path: Path) -> None:
    frame = _big_frame()
    page = render_html(frame)
    data = json.loads(page.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert data["timelines"]["long"]["n"] == 5000
    assert len(data["timelines"]["long"]["x"]) <= TIMELINE_POINTS
    assert len(page.encode()) < 2_000_000
    sessions = hit_ratio_summary(frame, overall=False)
    assert page.count("<tr>") >= sessions.height  # every session is in the (paged) table


@pytest.mark.slow
def test_chromium_renders_the_report(result: Any, tmp_path: Path) -> None:
    page = write_html(result, tmp_path / "report.html", sources=["calls.jsonl"])
    dom = _dom(page, tmp_path / "profile")
    # the page's own script ran, and the log's did not
    assert dom.title == "promptkit cache report"
    assert not any(tag == "img" for tag, _ in dom.tags)
    assert any(tag == "path" and a.get("class") == "pred" for tag, a in dom.tags)  # timeline drawn
    assert dom.text["hit-predicted"] == f"{result.hit_ratio:.2%}"
    reported = (
        result.requests["reported_cached_tokens"].sum() / result.requests["reported_prompt_tokens"].sum()
    )
    assert dom.text["hit-reported"] == f"{reported:.2%}"
    assert dom.text["n-requests"] == f"{result.requests.height:,}"
    assert dom.text["n-problems"] == str(result.problems.height) != "0"
    session_rows = [r["cells"][0] for r in dom.rows["sessions"][1:]]
    assert sorted(session_rows) == sorted(result.requests["session"].unique().to_list())
    assert "support <b>42</b>" in session_rows  # shown as text
    assert "<script>document.title='PWNED'" in dom.text["breaks"]  # the excerpt shows the markup as text
    from promptkit.report.causes import causes_by_cause

    causes = [r["cells"][0] for r in dom.rows["lost-by-cause"][1:]]
    assert causes == causes_by_cause(result)["cause"].to_list() and causes
    slots = [r["cells"][0] for r in dom.rows["lost-by-slot"][1:]]
    assert "cold start" in slots and "system" in slots

    shot = tmp_path / "report.png"
    _chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    size, colours = _png_colours(shot)
    assert size == (1280, 2000)
    assert colours > 50  # text, charts and tables, not a blank page


@pytest.mark.slow
def test_chromium_pages_a_ten_thousand_request_report(tmp_path: Path) -> None:
    page = write_html(_big_frame(), tmp_path / "big.html")
    dom = _dom(page, tmp_path / "profile")
    rows = dom.rows["sessions"][1:]
    visible = [r for r in rows if "display: none" not in r["style"]]
    assert len(rows) == 201 and len(visible) == PAGE_ROWS
    pages = -(-len(rows) // PAGE_ROWS)
    assert f"page 1 of {pages} ({len(rows)} rows)" in dom.text["sessions-section"]
    causes = [r["cells"][0] for r in dom.rows["lost-by-cause"][1:]]
    assert sorted(causes) == ["cold_start", "prefix_edit"]
    assert dom.text["n-requests"] == "10,000"


def test_breaks_show_the_text_before_the_divergence_when_the_frame_has_it() -> None:
    frame = _big_frame(700, 10)
    assert 'class="ctx"' not in render_html(frame)
    with_context = frame.with_columns(
        pl.when(pl.col("divergence_token").is_not_null())
        .then(pl.lit("Account: <b>"))
        .otherwise(None)
        .alias("divergence_context_text")
    )
    page = render_html(with_context)
    assert '<span class="ctx">…Account: &lt;b&gt;</span>' in page


def test_the_docstring_examples_hold() -> None:
    import doctest

    import promptkit.report.html
    import promptkit.report.summary

    for module in (promptkit.report.html, promptkit.report.summary):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


# ------------------------------------------------------------------------------------ fleet section


def _fleet_summary() -> pl.DataFrame:
    from promptkit.analysis.fleet import compare_fleet
    from promptkit.analysis.trace import read_trace

    head = read_trace(
        Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-conversation-head.jsonl"
    )
    return compare_fleet(
        head, replicas=[1, 4], policies=["round_robin", "prefix_aware"], capacities=[4096, None]
    ).summary


def test_fleet_section_is_added_to_the_report_and_self_contained(result: Any) -> None:
    summary = _fleet_summary()
    page = render_html(result, fleet=summary)
    assert 'id="fleet"' in page and '<a href="#fleet">' in page and 'id="fleet"' not in render_html(result)
    # the plot is embedded: the only source that is not an in-page anchor is the image's data: URI
    outside = re.findall(
        r"\b(?:src|href)\s*=\s*[\"'](?!#)([^\"']{0,22})", page.replace(html.escape(EVIL), "")
    )
    assert outside == ["data:image/png;base64,"]


@pytest.mark.slow
def test_chromium_renders_the_fleet_page(tmp_path: Path) -> None:
    from promptkit.report.html import render_fleet_html

    summary = _fleet_summary()
    page = tmp_path / "fleet.html"
    page.write_text(render_fleet_html(summary, sources=["trace.jsonl"]), encoding="utf-8")
    dom = _dom(page, tmp_path / "profile")
    assert dom.title == "promptkit fleet report"
    assert any(tag == "img" and (a.get("src") or "").startswith("data:image/png") for tag, a in dom.tags)
    rows = dom.rows["fleet-table"]
    header, body = rows[0]["cells"], [r["cells"] for r in rows[1:]]
    assert len(body) == summary.height == 8
    got = {
        (r[header.index("policy")], r[header.index("replicas")], r[header.index("capacity")]) for r in body
    }
    from promptkit.analysis.sizes import format_tokens

    want = {
        (p, str(n), "unbounded" if c is None else f"{format_tokens(c)} tokens")
        for p, n, c in summary.select("policy", "replicas", "capacity_tokens").iter_rows()
    }
    assert got == want
    assert "headline" not in dom.text  # the fleet page has no analysis sections


_PROBE = """<script>
window.addEventListener('load', () => { setTimeout(() => {
  const out = {viewport: document.documentElement.clientWidth, page: document.documentElement.scrollWidth, tables: []};
  for (const t of document.querySelectorAll('table')) {
    const r = t.getBoundingClientRect(), box = t.parentElement.getBoundingClientRect();
    out.tables.push({id: t.id, right: r.right, width: r.width, box: box.width});
  }
  const pre = document.createElement('pre'); pre.id = 'layout-probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 50); });
</script></body>"""


def _layout(page: Path, profile: Path, width: int) -> dict[str, Any]:
    """The rendered widths of the page and of every table, measured by a probe script in a copy."""
    copy = page.with_name(f"probe-{width}.html")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE), encoding="utf-8")
    dom = _chromium(copy, profile, f"--window-size={width},2000", "--virtual-time-budget=2000", "--dump-dom")
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the probe script ran"
    layout: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return layout


@pytest.mark.slow
def test_the_report_layout_fits_the_page_and_the_plots_keep_a_readable_shape(tmp_path: Path) -> None:
    from PIL import Image

    from promptkit.report.plots import save_plots

    result = analyze(str(ROOT / "fixtures" / "real-logs" / "deepseek"), provider="deepseek")
    page = write_html(result, tmp_path / "report.html")
    wide = _layout(page, tmp_path / "profile", 1400)
    assert wide["tables"] and {t["id"] for t in wide["tables"]} >= {"sessions", "pvr-table", "cost-table"}
    for table in wide["tables"]:  # at 1400 px every table fits its box and the page: none is clipped
        assert table["width"] <= table["box"] + 1 and table["right"] <= wide["viewport"] + 1, table
    narrow = _layout(page, tmp_path / "profile", 900)
    assert narrow["page"] <= narrow["viewport"] + 1  # narrower: a wide table scrolls in its box, the page not
    shot = tmp_path / "report.png"
    _chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,3000")
    assert _png_colours(shot)[0] == (1400, 3000)
    # the plots: one session's composition is not squashed into a strip
    one = analyze(str(ROOT / "promptkit" / "data" / "default-session.jsonl"))
    for name, path in save_plots(one, tmp_path / "plots").items():
        with Image.open(path) as image:
            w, h = image.size
        assert w / h <= 2.5, (name, image.size)
