"""Each answer a user reads, driven through the command line as a user types it (issue 42): lint and
analyze name the same head changes, the headline names its basis, --quiet is one line, the exit codes,
calibrate's refusal and warning, the providers table, the cited docs paths, the suggestions' "why",
the --advice fix table, a Mooncake trace, the help and hints, the docs examples' files, and text that is
never cut mid-word."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from promptkit import cli
from promptkit.analysis.causes import HEAD_CHANGES
from promptkit.layout import RequestRecord

ROOT = Path(__file__).resolve().parents[1]
BEFORE = str(ROOT / "fixtures/logs/session-before.jsonl")
OPENCODE = str(ROOT / "fixtures/opencode")
OTEL = str(ROOT / "fixtures/otel_genai")
TRACE = str(ROOT / "fixtures/traces/mooncake-readme-sample.jsonl")
DEEPSEEK = str(ROOT / "fixtures/real-logs/deepseek")
LONG = "You are a careful assistant who answers in full sentences. " * 6


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _write(path: Path, records: list[RequestRecord]) -> Path:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records), encoding="utf-8")
    return path


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"{name} a file", "parameters": {}}}


def _head_changes_log(path: Path) -> Path:
    """One session per class of head change: the system prompt, the tools, a volatile value, the
    tools' order, whitespace."""
    records = []
    for k in range(4):
        user = [{"role": "user", "content": "go on"}]
        sessions = {
            "system": ({"messages": [{"role": "system", "content": f"Persona {'AB'[k % 2]}xyz. " + LONG}, *user]}),
            "tools": {"messages": [{"role": "system", "content": LONG}, *user],
                      "tools": [_tool("read")] + ([_tool(f"extra{k}")] if k % 2 else [])},
            "volatile": {"messages": [{"role": "system", "content": f"Now: 2026-12-03T10:{k:02d}:00Z. " + LONG},
                                      *user]},
            "order": {"messages": [{"role": "system", "content": LONG}, *user],
                      "tools": [_tool("read"), _tool("write")][:: 1 if k % 2 else -1]},
            "whitespace": {"messages": [{"role": "system", "content": LONG + " " * (k % 2)}, *user]},
        }  # fmt: skip
        for name, body in sessions.items():
            records.append(RequestRecord(body, session=name, index=k, timestamp=float(k)))
    return _write(path, records)


# ----------------------------------------------------------------------------------- lint = analyze


def test_lint_and_analyze_name_the_same_head_changes(tmp_path: Path) -> None:
    log = str(_head_changes_log(tmp_path / "heads.jsonl"))
    code, out, _ = run("lint", log, "--provider", "exact", "--json")
    assert code == 0
    linted = {(f["finding"]["session"], f["finding"]["change_class"]) for f in json.loads(out)}
    code, out, _ = run("analyze", log, "--provider", "exact", "--json", "--out", str(tmp_path / "o"))
    assert code == 0
    named = {row["cause"] for row in json.loads(out)["lost_by_cause"]} & set(HEAD_CHANGES)
    # every class analyze names in the head, lint names too, and nothing else
    assert {c for _, c in linted} == named == set(HEAD_CHANGES)
    assert linted == {
        ("system", "system_changed"), ("tools", "tools_changed"), ("volatile", "volatile_value"),
        ("order", "reordered"), ("whitespace", "whitespace"),
    }  # fmt: skip


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_lint_names_the_system_prompt_change_and_its_measured_fix_with_every_move() -> None:
    code, out, _ = run("lint", BEFORE)
    assert code == 0
    assert "no head region changes" not in out
    assert "system_changed (the system prompt changed)" in out
    assert "measured by replay: hit ratio 20.7% → 92.6%" in out
    # the fix every finding shares is printed whole once; the others point at it
    assert out.count("measured by replay") == 1 and "the same set of 6 changes as finding 1" in out
    code, out, _ = run("lint", BEFORE, "--json")
    first = json.loads(out)[0]
    assert first["finding"]["change_class"] == "system_changed" and first["saves"]
    # the finding's fix is the measured one, every move of it (not the one move the lint first saw)
    assert first["finding"]["fix"] == first["fix"]["transform"]
    assert first["finding"]["fix_specs"] == first["fix"]["specs"] and len(first["fix"]["specs"]) == 6
    assert all(f"move:key={k}" in first["fix"]["specs"] for k in ("cross-session", "file-list"))


# ----------------------------------------------------------------------------------------- headline


@pytest.mark.slow
def test_the_headline_names_its_basis_and_a_line_says_why_the_bases_differ(tmp_path: Path) -> None:
    code, out, _ = run("analyze", OTEL, "--out", str(tmp_path / "a"), "--no-plots", "--no-html")
    assert code == 0
    head = out.split("\n\n")[0]
    assert "basis: reported where the log has usage (2 of 5 requests), else predicted" in head
    assert "Predicted hit ratio 0.00% vs reported 44.97%" in head and "differ because" in head
    assert "hit the provider's cache on their first request" in head  # the reason the analysis found
    assert "Tokens lost per slot (anchor / frame role; predicted" in out
    assert "Tokens lost per contributor key (predicted)" in out
    assert "Tokens lost by cause (the headline's basis" in out
    code, out, _ = run("analyze", BEFORE, "--out", str(tmp_path / "b"), "--no-plots", "--no-html")
    head = out.split("\n\n")[0]
    assert "basis: predicted, promptkit's cache rules (the log reports no usage)" in head
    assert "differ because" not in head
    # an Anthropic log that shows no cache_control: its breakpoints inferred, the bases agree
    code, out, _ = run("analyze", OPENCODE, "--out", str(tmp_path / "c"), "--no-plots", "--no-html")
    head = out.split("\n\n")[0]
    assert "basis: reported, the provider's usage on 3 of 3 requests" in head
    assert "differ because" not in head and "Predicted hit ratio" not in head


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [[BEFORE], [OPENCODE], [TRACE], ["--calibration", "default"], [BEFORE, "--model", "gpt-9"]],
    ids=["session-before", "opencode", "trace", "calibration", "no-price"],
)
def test_quiet_prints_exactly_one_line(argv: list[str], tmp_path: Path) -> None:
    code, out, err = run("analyze", *argv, "--quiet", "--no-plots", "--no-html", "--out", str(tmp_path))
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith("predicted hit ratio ")


# --------------------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "missing.jsonl", "--min-hit", "0.5"],
        ["analyze", "missing.jsonl"],
        ["lint", "missing.jsonl"],
        ["whatif", "missing.jsonl", "--suggest"],
        ["calibrate", "missing.jsonl", "--out", "c.json"],
        ["fleet", "missing.jsonl"],
    ],
    ids=lambda a: a[0],
)
def test_a_missing_path_exits_2_for_every_command(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*argv)
    assert (code, out) == (2, "") and "missing.jsonl: no such file or directory" in err


@pytest.mark.slow
def test_exit_codes_tell_a_failed_threshold_from_bad_input(tmp_path: Path) -> None:
    assert run("check", BEFORE, "--min-hit", "0.1")[0] == 0
    code, out, _ = run("check", BEFORE, "--min-hit", "0.5")
    assert code == 1 and "1 of 1 session(s) fail" in out
    binary = tmp_path / "calls.jsonl"
    binary.write_bytes(b"\x00\xff\xfe" * 50)
    code, _, err = run("check", str(binary), "--min-hit", "0.5")
    assert code == 2 and str(binary) in err and "Traceback" not in err
    assert run("check", BEFORE)[0] == 2  # no threshold: usage
    assert run("check", BEFORE, "--min-hit", "nope")[0] == 2


def test_an_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    import promptkit.commands.check as check

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "run_check", interrupted)
    code, _, err = run("check", BEFORE, "--min-hit", "0.5")
    assert code == 130 and err == "promptkit: interrupted\n"


def test_the_exit_codes_are_documented_as_the_cli_defines_them() -> None:
    page = (ROOT / "docs/reference/cli.md").read_text(encoding="utf-8")
    assert set(cli.EXIT_CODES) == {0, 1, 2, 130}
    for code in cli.EXIT_CODES:
        assert re.search(rf"^\| {code} \| ", page, re.M), code
    assert cli.main(["--help"]) == 0


# ---------------------------------------------------------------------------------------- calibrate


def test_calibrate_refuses_a_log_without_usage_before_tokenizing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import promptkit.analysis as analysis

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("calibrate analyzed a log that has no usage")

    monkeypatch.setattr(analysis, "analyze", never)
    code, out, err = run("calibrate", "--out", str(tmp_path / "c.json"))  # the bundled log: no usage
    assert code == 2 and out == ""
    assert "no request reports usage with cached tokens" in err and "calibrate needs logs" in err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.slow
def test_a_calibration_records_where_it_was_fitted_and_warns_elsewhere(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    code, out, _ = run("calibrate", DEEPSEEK, "--out", str(cal))
    assert code == 0 and "calibration for deepseek (routes: model deepseek-chat)" in out
    saved = json.loads(cal.read_text(encoding="utf-8"))
    assert (saved["provider"], saved["routes"]) == ("deepseek", ["model deepseek-chat"])
    code, out, err = run("analyze", OPENCODE, "--calibration", str(cal), "-q", "--out", str(tmp_path / "o"))
    assert code == 0 and out.count("\n") == 1
    assert "warning: the calibration was fitted on deepseek logs" in err and "anthropic logs" in err
    code, _, err = run(
        "analyze", DEEPSEEK, "--calibration", str(cal), "-q", "--no-plots", "--out", str(tmp_path / "d")
    )
    assert code == 0 and "warning" not in err
    for name in ("deepseek", "gemini"):  # the bundled ones say it too
        bundled = json.loads((ROOT / f"promptkit/data/calibration-{name}.json").read_text(encoding="utf-8"))
        assert bundled["provider"] == name and bundled["routes"]


# ---------------------------------------------------------------------------------------- providers


def test_providers_is_a_table_with_prices_and_their_date_and_json() -> None:
    from promptkit.providers.registry import available_providers

    code, out, _ = run("providers")
    assert code == 0
    header = out.splitlines()[2]
    assert header.split() == ["provider", "tokenizer", "cache", "rules", "minimum", "TTL", "priced", "models"]
    for name in available_providers():
        assert re.search(rf"^{name} +\S", out, re.M), name
    assert "<function" not in out and "Cache(" not in out and " at 0x" not in out
    assert re.search(r"^openai .* 10m \(24h on request\) ", out, re.M)
    assert re.search(r"^anthropic .* 1,024 +5m \(1h on request\)", out, re.M)
    assert "(prices as of 2026-12-04)" in out and "units of 64 tokens" in out
    code, out, _ = run("providers", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == set(available_providers())
    assert rows["glm"]["tokenizer"] == "glm-4.5v" and rows["deepseek"]["minimum_tokens"] == 0
    priced = rows["anthropic"]["priced_models"]
    # every price of the profile, each with its date and page, exactly as the profile holds it
    table = available_providers()["anthropic"].prices
    assert sorted(p["model"] for p in priced) == sorted(table)
    for p in priced:
        price = table[p["model"]]
        assert (p["cache_hit"], p["cache_miss"], p["output"], p["as_of"], p["source"]) == (
            price.cache_hit,
            price.cache_miss,
            price.output,
            price.as_of,
            price.source,
        )


# --------------------------------------------------------------------------------------- docs paths


_DOCS_PATH = re.compile(r"docs/[\w./-]+\.md(?:#[\w-]+)?")


def _check_docs_path(cited: str) -> None:
    path, _, anchor = cited.partition("#")
    page = ROOT / path
    assert page.is_file(), f"{cited}: no such page"
    if anchor:
        slugs = {
            re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)
        }
        assert anchor in slugs, f"{cited}: no heading #{anchor}"


def test_every_docs_path_the_legend_the_html_and_the_code_cite_exists(tmp_path: Path) -> None:
    code, out, _ = run("analyze", OPENCODE, "--out", str(tmp_path), "--no-plots")
    assert code == 0
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    cited = set(_DOCS_PATH.findall(out)) | set(_DOCS_PATH.findall(html))
    assert "docs/how-to/why-did-my-cache-miss.md#the-causes" in cited  # the cause column's legend
    for source in [*ROOT.joinpath("promptkit").rglob("*.py"), *ROOT.joinpath("promptkit/data").glob("*.j2")]:
        cited |= set(_DOCS_PATH.findall(source.read_text(encoding="utf-8")))
    assert len(cited) >= 8
    for path in sorted(cited):
        _check_docs_path(path)


# -------------------------------------------------------------------------------- whatif and advice


def test_whatif_suggest_never_shows_a_why_whose_two_sides_read_the_same(tmp_path: Path) -> None:
    head = "Build log of the nightly integration run on the staging cluster, started at "
    records = [
        RequestRecord(
            {"messages": [{"role": "system", "content": f"{head}2026-12-03T10:{k:02d}:00Z.\n" + LONG},
                          {"role": "user", "content": "status?"}]},
            session="s", index=k, timestamp=float(k),
        )
        for k in range(4)
    ]  # fmt: skip
    log = _write(tmp_path / "calls.jsonl", records)
    code, out, _ = run("whatif", str(log), "--suggest", "--provider", "exact", "--json")
    assert code == 0
    reasons = [s["reason"] for s in json.loads(out)["suggestions"]]
    pairs = [p for r in reasons for p in re.findall(r"('[^']*') -> ('[^']*')", r)]
    assert pairs, reasons
    assert all(a != b for a, b in pairs), pairs
    # the one change, each side long enough to tell the two apart
    assert pairs == [("'…6-12-03T10:00:00Z.'", "'…6-12-03T10:01:00Z.'")]


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_the_advice_fix_table_lists_each_fix_once_with_its_whole_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a terminal 200 wide: each table in one piece
    code, out, _ = run("analyze", BEFORE, "--advice", "--out", str(tmp_path), "--no-plots", "--no-html")
    assert code == 0
    block = out.split("Fixes for the largest breaks")[1].split("\n\n")[0]
    rows = [line for line in block.splitlines() if line.startswith("│")]
    assert len(rows) == 2  # the header and the one fix, never one row per break
    assert "group:73921: #70, #69, #68, #67 (+6 more)" in block
    command = next(line.strip() for line in block.splitlines() if line.strip().startswith("promptkit whatif"))
    assert "…" not in command and command.count("--transform move:key=") == 6


# ---------------------------------------------------------------------------------------- a trace


def test_a_mooncake_trace_is_analyzed_as_a_trace(tmp_path: Path) -> None:
    code, out, _ = run("analyze", TRACE, "--out", str(tmp_path / "t"), "--no-plots", "--no-html")
    assert code == 0
    assert "Lost to your layout: 0 tokens" in out and "message_edited" not in out
    assert "A block trace (Mooncake): no text, so no layout cause" in out and "promptkit fleet" in out
    code, out, _ = run("analyze", TRACE, "--json", "--out", str(tmp_path / "j"))
    assert {row["group"] for row in json.loads(out)["lost_by_cause"]} == {"inherent"}


# ---------------------------------------------------------------------------------- help and hints


def test_analyze_help_lists_every_registered_provider(capsys: pytest.CaptureFixture[str]) -> None:
    from promptkit.providers.registry import available_providers

    assert cli.main(["analyze", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"({', '.join(available_providers())}; see promptkit providers)" in text


def test_a_mistyped_command_or_choice_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["analyse"]) == 2
    assert "did you mean 'analyze'?" in capsys.readouterr().err
    assert cli.main(["analyze", "--view", "simulted"]) == 2
    assert "did you mean 'simulated'?" in capsys.readouterr().err
    assert cli.main(["zzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_percentage_for_min_hit_is_read_as_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("check", BEFORE, "--min-hit", "80%") == run("check", BEFORE, "--min-hit", "0.8")
    assert run("check", BEFORE, "--min-hit", "20%")[0] == 0  # 20.7% >= 20%
    assert cli.main(["check", BEFORE, "--min-hit", "80"]) == 2
    assert "did you mean 0.80?" in capsys.readouterr().err
    assert cli.main(["check", BEFORE, "--min-hit", "180%"]) == 2
    assert "between 0% and 100%" in capsys.readouterr().err


def test_the_readme_own_logs_block_names_each_option_once() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Bring your own logs")[1].split("```")[1]
    for option in ("--jobs", "--view simulated", "--stream", "--provider"):
        assert block.count(option) == 1, option


# ------------------------------------------------------------------------- docs examples' files


_WRITES_HERE = [
    re.compile(r"--out +(?![\"']?(?:/tmp|\"?\$))[\w.-]+/?"),
    re.compile(r"(?:write_jsonl|save_plots)\([^,]+, *[\"'][^/\"']"),
    re.compile(r"savefig\([\"']"),
    re.compile(r"Path\([\"'][\w.-]+\.jsonl[\"']\)"),
]


def test_the_documented_examples_write_nothing_into_the_working_directory() -> None:
    from tests.test_docs import code_blocks

    pages = [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "_ext" not in p.parts)]
    found = []
    for page in pages:
        for block in code_blocks(page.read_text(encoding="utf-8")):
            for pattern in _WRITES_HERE:
                found += [f"{page.relative_to(ROOT)}:{block.line}: {m}" for m in pattern.findall(block.code)]
    assert found == []


# ------------------------------------------------------------------------------ text cut at words


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def _words_log(path: Path) -> Path:
    records = [
        RequestRecord(
            {"messages": [{"role": "system", "content": " ".join(WORDS) + f" papa quebec {k}{k}{k} romeo. " + LONG},
                          {"role": "user", "content": "go"}]},
            session="s", index=k, timestamp=float(k),
        )
        for k in range(3)
    ]  # fmt: skip
    return _write(path, records)


def test_before_text_in_the_terminal_starts_at_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    log = _words_log(tmp_path / "words.jsonl")
    code, out, _ = run(
        "analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "o"), "--no-plots", "--no-html"
    )
    assert code == 0
    table = out.split("Largest breaks")[1].split("\n\n")[0].splitlines()
    header = [c.strip() for c in table[2].strip("│").split("┆")]
    column = header.index("before_text")
    cells = [
        [c.strip() for c in line.strip("│").split("┆")][column] for line in table if line.startswith("│ s ")
    ]
    assert cells
    for cell in cells:
        assert cell.startswith("…") and "…" not in cell[1:], cell  # cut once, at its start
        assert all(word in [*WORDS, "papa", "quebec"] for word in cell[1:].split()), cell  # whole words


CHROMIUM = shutil.which("chromium")

#: Appended to the report: counts the words of the break texts that the browser split over two lines.
_MEASURE = """<script>
addEventListener('load', () => {
  let split = 0, words = 0;
  document.querySelectorAll('.break pre').forEach(pre => {
    pre.style.width = '180px';
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    const text = []; let node;
    while ((node = walker.nextNode())) text.push(node);
    const whole = text.map(n => n.data).join('');
    for (const m of whole.matchAll(/[A-Za-z]{3,}/g)) {
      let start = m.index, end = m.index + m[0].length, offset = 0, range = document.createRange();
      for (const n of text) {
        const len = n.data.length;
        if (start >= offset && start <= offset + len) range.setStart(n, start - offset);
        if (end >= offset && end <= offset + len) { range.setEnd(n, end - offset); break; }
        offset += len;
      }
      const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      words += 1; if (tops.size > 1) split += 1;
    }
  });
  const out = document.createElement('div'); out.id = 'measured';
  out.textContent = words + ' ' + split; document.body.appendChild(out);
});
</script>"""


@pytest.mark.slow
def test_the_html_wraps_cached_and_sent_text_between_words(tmp_path: Path) -> None:
    assert CHROMIUM is not None, "the browser tests need headless Chromium: apt-get install -y chromium"
    log = _words_log(tmp_path / "words.jsonl")
    code, _, _ = run("analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "o"), "--no-plots")
    assert code == 0
    page = tmp_path / "o" / "report.html"
    css = page.read_text(encoding="utf-8")
    assert "word-break:break-all" not in css
    page.write_text(css.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'p'}",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout  # fmt: skip
    measured = re.search(r'id="measured">(\d+) (\d+)<', dom)
    assert measured is not None, "the page's measuring script did not run"
    words, split = int(measured.group(1)), int(measured.group(2))
    assert words > 20 and split == 0
