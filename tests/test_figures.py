"""Every figure the README and the docs state is recomputed here from the data and compared as it is shown.

A figure that drifts (a changed fixture, a changed cache model, a changed benchmark) fails here instead
of going stale. Figures that depend on wall-clock time are not compared: the pages label them as
measured on a given machine.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from promptkit.analysis import analyze

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ANALYSIS_GUIDE = (ROOT / "docs" / "guide" / "analysis.md").read_text(encoding="utf-8")


def _bold(text: str) -> list[str]:
    return re.findall(r"\*\*([^*]+)\*\*", text)


@pytest.fixture(scope="module")
def real(real_deepseek: Callable[..., Any]) -> pl.DataFrame:
    return real_deepseek(view="simulated").requests


def test_real_log_figures(real: pl.DataFrame) -> None:
    runs = {2: "two", 3: "three", 4: "four"}[real["session"].n_unique()]
    assert (
        f"On {runs} real DeepSeek agent runs with the figures DeepSeek reported (`fixtures/real-logs/`, "
        f"{real.height} calls)" in _flat(README)
    )
    exact = int((real["prompt_tokens"] == real["reported_prompt_tokens"]).sum())
    assert f"**{exact} of {real.height}**" in README
    predicted = real["predicted_cached_tokens"].sum() / real["prompt_tokens"].sum()
    reported = real["reported_cached_tokens"].sum() / real["reported_prompt_tokens"].sum()
    assert f"**{predicted:.4f}**" in README and f"**{reported:.4f}**" in README
    kept = real.filter(
        ~pl.col("session").str.contains("pvlib")
    )  # the two runs where DeepSeek kept every entry
    to_the_token = int((kept["predicted_cached_tokens"] == kept["reported_cached_tokens"]).sum())
    assert f"**{to_the_token} of {kept.height}**" in README
    assert f"to the token on {to_the_token} of {kept.height} calls" in ANALYSIS_GUIDE
    # the upper-bound claim, call by call: never less than DeepSeek served, except on the earliest call
    # of the log, which hit a head cached by calls the log does not hold
    under = real.filter(pl.col("predicted_cached_tokens") < pl.col("reported_cached_tokens"))
    assert under.height == 1
    assert under["timestamp"][0] == real["timestamp"].min() and under["index"][0] == 0


def test_bundled_default_figures() -> None:
    before = analyze(ROOT / "promptkit" / "data" / "default-session.jsonl")
    after = analyze(ROOT / "fixtures" / "logs" / "support-after.jsonl")
    assert before.hit_ratio is not None and after.hit_ratio is not None
    shown = _bold(README)
    assert f"{before.hit_ratio:.1%}" in shown
    assert f"{after.hit_ratio:.1%}" in shown
    assert before.requests["session"].n_unique() == 1  # one conversation
    # a turn is a user message answered: the calls whose request ends with a user message (the others
    # continue a tool loop, ending with the tool's result)
    from promptkit.formats import read_logs

    records = read_logs(ROOT / "promptkit" / "data" / "default-session.jsonl").records
    turns = sum(1 for r in records if r.request["messages"][-1]["role"] == "user")
    assert 0 < turns < len(records) == before.requests.height
    assert f"{turns} turns and {before.requests.height} calls" in README
    # "almost all of the loss is the `account-snapshot` block in the `context` anchor"
    from promptkit.report.metrics import tokens_lost_by_key

    top = tokens_lost_by_key(before).row(0, named=True)
    assert (top["slot"], top["key"]) == ("context", "account-snapshot") and top["share"] > 0.9
    assert "almost all\nof the loss is the `account-snapshot` block in the `context` anchor" in README


@pytest.mark.slow
def test_the_suggested_fix_predicts_what_the_fixed_log_measures() -> None:
    from promptkit.formats import read_logs
    from promptkit.whatif import suggest

    records = read_logs(ROOT / "promptkit" / "data" / "default-session.jsonl")
    best = suggest(records)[0]
    keys = {"account-snapshot", "help-center"}
    assert all(k in best.transform.describe() for k in keys)
    assert f"**{best.after_hit_ratio:.1%}**" in README
    after = analyze(ROOT / "fixtures" / "logs" / "support-after.jsonl")
    assert after.hit_ratio is not None and f"measures {after.hit_ratio:.1%}" in README


@pytest.mark.slow
def test_the_real_log_table_of_the_analysis_guide_is_what_the_data_gives(real_deepseek: Callable[..., Any]) -> None:
    """docs/guide/analysis.md's table, row by row: calls, reported and predicted hit ratios, mean
    absolute error in tokens, per run and overall, in both views."""
    for view in ("consecutive", "simulated"):
        frame = real_deepseek(provider="deepseek", view=view).requests
        runs = frame.with_columns(
            pl.col("session").str.split("__").list.last().str.replace("-python", "").alias("run")
        )
        rows = [(name, part) for (name,), part in runs.group_by(["run"], maintain_order=True)] + [
            ("**all**", runs)
        ]
        for name, part in rows:
            reported = part["reported_cached_tokens"].sum() / part["reported_prompt_tokens"].sum()
            predicted = part["predicted_cached_tokens"].sum() / part["prompt_tokens"].sum()
            mae = (part["predicted_cached_tokens"] - part["reported_cached_tokens"]).abs().mean()
            assert isinstance(mae, float)
            bold = name.startswith("**")
            shown = (
                f"| {view} | {name} | {part.height} | "
                + (
                    f"**{reported:.4f}** | **{predicted:.4f}** | "
                    if bold
                    else f"{reported:.4f} | {predicted:.4f} | "
                )
                + f"{round(mae)} |"
            )
            assert shown in ANALYSIS_GUIDE, shown


# ----------------------------------------------------------------------------------------------------
# docs/how-to/trimming.md and docs/how-to/what-if.md: the deterministic benchmark tables and the figures
# their prose states, recomputed by the benchmarks' own functions with their default inputs (both
# benchmarks share one pool of two spawned worker processes) and compared cell by cell, rounded as shown.

TRIMMING = (ROOT / "docs" / "how-to" / "trimming.md").read_text(encoding="utf-8")
WHAT_IF = (ROOT / "docs" / "how-to" / "what-if.md").read_text(encoding="utf-8")


def _flat(text: str) -> str:
    """The page's prose with its line breaks as spaces (a stated figure may wrap)."""
    return re.sub(r"\s*\n\s*", " ", text)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_after(text: str, marker: str) -> list[list[str]]:
    """The rows (header first, the separator row left out) of the first Markdown table after the first
    line that starts with ``marker``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(marker)), None)
    assert start is not None, f"no line starts with {marker!r}"
    i = next(j for j in range(start + 1, len(lines)) if lines[j].startswith("|"))
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i].strip()):
            rows.append(_cells(lines[i]))
        i += 1
    return rows


def _same_table(shown: list[list[str]], computed: list[str], where: str) -> None:
    """A table on the page against the lines the benchmark prints for it, cell by cell."""
    expected = [_cells(line) for line in computed if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line)]
    assert [row[0] for row in shown] == [row[0] for row in expected], f"{where}: rows differ"
    for got, want in zip(shown, expected, strict=True):
        diff = [(h, g, w) for h, g, w in zip(expected[0], got, want, strict=True) if g != w]
        assert len(got) == len(want) and not diff, (
            f"{where}, row {' | '.join(want[:3])!r}: (column, shown, data) {diff}"
        )


@pytest.fixture(scope="module")
def benchmarks() -> dict[str, Any]:
    """Both benchmarks run with their defaults: the rows of trim_policies (every configuration, every
    provider, and DeepSeek with cl100k_base in the two compared configurations) and the two tables of
    whatif_tradeoffs."""
    from benchmarks import trim_policies, whatif_tradeoffs
    from promptkit.analysis.executors import ProcessPool

    trim_work = trim_policies.tasks()
    whatif_work = whatif_tradeoffs.tasks()
    # forked from the session's fork server (tests/conftest.py), which has the three tokenizers loaded:
    # two spawned workers would each import the analysis and load them again
    with ProcessPool(2, tokenizers=("deepseek", "o200k_base", "cl100k_base")) as pool:
        # the trimming replays (the largest budgets first), then the what-if replays (most expensive first):
        # the cheap ones last, so that the two workers finish together
        trim_futures = [pool.submit(trim_policies.measure, t) for t in trim_work]
        whatif_futures = [pool.submit(whatif_tradeoffs.call, w) for w in whatif_work]
        trim_rows = [row for f in trim_futures for row in f.result()]
        elision, stamps = whatif_tradeoffs.assemble([f.result() for f in whatif_futures])
    return {"trim": trim_rows, "elision": elision, "stamps": stamps}


def _trim_row(
    rows: list[dict[str, Any]], provider: str, budget: int, policy: str, tokenizer: str | None = None
) -> dict[str, Any]:
    (row,) = [
        r
        for r in rows
        if (r["provider"], r["tokenizer"], r["budget"], r["policy"]) == (provider, tokenizer, budget, policy)
    ]
    return row


@pytest.mark.slow
def test_the_trimming_tables_are_what_the_benchmark_computes(benchmarks: dict[str, Any]) -> None:
    from benchmarks import trim_policies

    rows = benchmarks["trim"]
    for provider in trim_policies.MODELS:
        computed = trim_policies.markdown(rows, provider)
        heading, table, no_cache = computed[0], computed[2:-2], computed[-1]
        assert heading in TRIMMING.splitlines(), f"the heading of {provider}'s table: {heading}"
        _same_table(_table_after(TRIMMING, heading), table, f"trimming.md, {provider}")
        assert no_cache in TRIMMING.splitlines(), no_cache


@pytest.mark.slow
def test_the_trimming_prose_states_what_the_benchmark_computes(benchmarks: dict[str, Any]) -> None:
    from benchmarks import trim_policies as tp
    from promptkit.assembly.token_counts import message_tokens

    page = _flat(TRIMMING)
    rows = [r for r in benchmarks["trim"] if r["tokenizer"] is None]
    # the conversation: turns, calls, the head and a turn in the budget's tokens
    head, turns = tp.build_conversation(tp.TURNS, tp.SEED)
    count = tp._counter()
    head_tokens = sum(message_tokens(m, count) for m in head)
    turn_tokens = sum(
        message_tokens(m, count)
        for t in turns
        for m in (t.question, *(m for step in t.steps for m in step), t.answer)
    ) / len(turns)
    calls = {r["calls"] for r in rows}
    assert calls == {sum(len(t.steps) + 1 for t in turns)}
    assert (
        f"one agent conversation of {tp.TURNS} turns (a coding agent: a stable head of about "
        f"{round(head_tokens, -2):,.0f} tokens; every turn a question, zero to two tool calls with their "
        f"results and an answer, about {turn_tokens:.0f} tokens a turn: {calls.pop()} model calls)" in page
    )
    budgets = " / ".join(f"{b:,}" for b in tp.BUDGETS)
    assert (
        f"({tp.TURNS} turns, seed {tp.SEED}, budgets {budgets} counted with cl100k_base, low-water marks "
        f"{min(tp.LOW_WATERS)} to {max(tp.LOW_WATERS)})." in page
    )
    # the ranges of hit ratios
    chunked = [r["hit_ratio"] for r in rows if r["policy"].startswith("chunked")]
    sliding = [r["hit_ratio"] for r in rows if r["policy"] == "sliding"]
    assert f"cache warm for {min(chunked):.2f} to {max(chunked):.2f} of the prompt tokens" in page
    assert f"sliding window gets {min(sliding):.2f} to {max(sliding):.2f}" in page
    summary = max(r["summary_tokens"] for r in rows)
    assert summary > 0 and f"bounded to about {round(summary, -2):.0f} tokens" in page
    # DeepSeek's own tokenizer against cl100k_base, in the two compared configurations
    pairs, moved = [], []
    for config in tp.COMPARED:
        own = _trim_row(benchmarks["trim"], "deepseek", tp.COMPARED_BUDGET, config.label)
        other = _trim_row(
            benchmarks["trim"], "deepseek", tp.COMPARED_BUDGET, config.label, tp.COMPARED_TOKENIZER
        )
        pairs.append(f"{own['hit_ratio']:.4f} against {other['hit_ratio']:.4f} {config.label}")
        moved.append(abs(own["hit_ratio"] - other["hit_ratio"]))
    bound = re.search(r"moved the hit ratio by less than (0\.\d+)", page)
    assert bound is not None and max(moved) < float(bound[1])
    assert f"{', '.join(pairs)}, at {tp.COMPARED_BUDGET:,} tokens" in page
    # choosing the low-water mark: $ per 1,000 turns per 1,000 mean prompt tokens at 8,000 tokens
    shown = _table_after(TRIMMING, "context it buys")
    assert shown[0] == ["low water", *(tp.NAMES[p] for p in tp.MODELS)]
    computed = [
        [f"{w}"]
        + [
            f"{(r := _trim_row(rows, p, 8000, f'chunked {w:.1f}'))['cost_1k_turns'] / r['mean_prompt'] * 1000:.3f}"
            for p in tp.MODELS
        ]
        for w in tp.LOW_WATERS
    ]
    assert shown[1:] == computed
    more = [
        _trim_row(rows, p, 8000, "chunked 0.5")["mean_prompt"]
        / _trim_row(rows, p, 8000, "chunked 0.4")["mean_prompt"]
        - 1
        for p in tp.MODELS
    ]
    assert f"0.5 keeps {min(more) * 100:.0f} to {max(more) * 100:.0f} % more context than 0.4" in page
    within = max(
        abs(
            _trim_row(rows, p, b, "chunked 0.5")["hit_ratio"]
            - _trim_row(rows, p, b, "chunked 0.4")["hit_ratio"]
        )
        for p in tp.MODELS
        for b in tp.BUDGETS
    )
    assert f"ratio within {within:.3f} of it at every budget" in page


@pytest.mark.slow
def test_the_what_if_tables_are_what_the_benchmark_computes(benchmarks: dict[str, Any]) -> None:
    from benchmarks import whatif_tradeoffs as wt

    _same_table(
        _table_after(WHAT_IF, "### Eliding old tool outputs"),
        wt.elision_markdown(benchmarks["elision"]),
        "what-if.md, eliding old tool outputs",
    )
    _same_table(
        _table_after(WHAT_IF, "### A timestamp in the system prompt"),
        wt.timestamp_markdown(benchmarks["stamps"]),
        "what-if.md, a timestamp in the system prompt",
    )


@pytest.mark.slow
def test_the_what_if_prose_states_what_the_benchmark_computes(benchmarks: dict[str, Any]) -> None:
    from benchmarks import whatif_tradeoffs as wt
    from promptkit.analysis import get_tokenizer
    from promptkit.report import resolve_prices

    page = _flat(WHAT_IF)
    rows = benchmarks["elision"]
    # the log
    system = {
        len(get_tokenizer(t).encode(wt.system_prompt())) for t in ("deepseek", "o200k_base", "cl100k_base")
    }
    assert len(system) == 1 and f"a system prompt of about {round(system.pop(), -2):,} tokens" in page
    assert f"one call per step, {wt.STEP_SECONDS:.0f} seconds apart" in page
    tokenizers = [wt._options(p).get("tokenizer", "DeepSeek's own") for p in wt.PROVIDERS]
    assert f"tokenizers: {', '.join(tokenizers)})" in page
    assert f"({', '.join(wt.PROVIDERS.values())};" in page

    def ratio(provider: str, steps: int, lines: int, side: str = "elide") -> float:
        (r,) = [r for r in rows if (r["provider"], r["steps"], r["lines"]) == (provider, steps, lines)]
        return float(r[f"{side}_cost"] / r["keep_cost"])

    def grid(provider: str, side: str = "elide") -> dict[tuple[int, int], float]:
        return {(s, n): ratio(provider, s, n, side) for s in wt.STEPS for n in wt.LINES}

    # the break-even rule of thumb, from the list prices: N ≈ 2 (K - 1) × re-billed / hit price
    prices = resolve_prices(None)
    deepseek, openai, anthropic = (prices[m] for m in wt.PROVIDERS.values())
    assert deepseek.cache_write is None and openai.cache_write is None and anthropic.cache_write is not None
    keep = 5
    assert f"with K = {keep} that is {2 * (keep - 1)} × the ratio" in page
    assert (
        f"DeepSeek (hit 1/{deepseek.cache_miss / deepseek.cache_hit:.0f} of the miss price): about {2 * (keep - 1) * deepseek.cache_miss / deepseek.cache_hit:.0f} calls"
        in page
    )
    assert (
        f"OpenAI (hit 1/{openai.cache_miss / openai.cache_hit:.0f}): about {2 * (keep - 1) * openai.cache_miss / openai.cache_hit:.0f} calls"
        in page
    )
    write = anthropic.cache_write / anthropic.cache_miss
    assert (
        f"Anthropic (write {write:.2f} × {anthropic.cache_miss:.0f} $, hit {anthropic.cache_hit:.1f} $: "
        f"{anthropic.cache_write / anthropic.cache_hit:.1f}): about "
        f"{2 * (keep - 1) * anthropic.cache_write / anthropic.cache_hit:.0f} calls" in page
    )
    longest, most = max(wt.STEPS), max(wt.LINES)
    # DeepSeek: cheaper only in the longest runs, dearer in every shorter one
    d = grid("deepseek")
    cheaper = sorted(k for k, v in d.items() if v < 1)
    assert {s for s, _ in cheaper} == {longest}
    shorter = max(s for s in wt.STEPS if s < longest)
    assert all(v > 1 for (s, _), v in d.items() if s <= shorter)
    lines = " and ".join(str(n) for _, n in cheaper)
    costs = " and ".join(f"{d[k]:.2f}" for k in cheaper)
    assert (
        f"cheaper at {longest} steps of {lines} lines ({costs} of the cost) and dearer up to {shorter} steps"
        in page
    )
    # OpenAI: dearer below one run length, cheaper above it, mixed at it
    o = grid("openai")
    (crossing,) = [s for s in wt.STEPS if min(o[s, n] for n in wt.LINES) < 1 < max(o[s, n] for n in wt.LINES)]
    assert all(v > 1 for (s, _), v in o.items() if s < crossing)
    assert all(v < 1 for (s, _), v in o.items() if s > crossing)
    assert (
        f"the ratio crosses 1 at {crossing} steps and falls to {o[longest, most]:.2f} at {longest} steps of "
        f"{most} lines" in page
    )
    # Anthropic: dearer in every run
    a = grid("anthropic")
    assert all(v > 1 for v in a.values())
    assert (
        f"costs more in every run measured here ({a[longest, most]:.2f} × at {longest} steps of {most} lines)"
        in page
    )
    # polling=10: the hit ratio stays above the bound the page states
    above = re.search(r"the hit ratio stays above (\d+)%", page)
    assert above is not None and min(r["batch_hit"] for r in rows) > int(above[1]) / 100
    polled = {p: grid(p, "batch") for p in wt.PROVIDERS}
    lines = 50  # the page's example: observations of 50 lines
    pays = min(s for s in wt.STEPS if all(polled[p][s, lines] < 1 for p in wt.PROVIDERS))
    assert all(polled[p][s, lines] < 1 for p in wt.PROVIDERS for s in wt.STEPS if s >= pays)
    d_, o_, a_ = (polled[p][pays, lines] for p in wt.PROVIDERS)
    assert (
        f"eliding then pays from about {pays} steps of {lines} lines under all three providers "
        f"(DeepSeek {d_:.2f}, OpenAI {o_:.2f}, Anthropic {a_:.2f} of the cost)" in page
    )
    d_, o_, a_ = (polled[p][longest, lines] for p in wt.PROVIDERS)
    assert (
        f"at {longest} steps of {lines} lines costs {min(d_, o_, a_):.2f} to {max(d_, o_, a_):.2f} of keeping every "
        f"output (DeepSeek {d_:.2f}, OpenAI {o_:.2f}, Anthropic {a_:.2f})" in page
    )
    shortest = min(wt.STEPS)
    short = [
        grid(p, side)[shortest, n] for p in wt.PROVIDERS for side in ("elide", "batch") for n in wt.LINES
    ]
    assert all(v > 1 for v in short)
    assert f"In short sessions ({shortest} steps) keeping every output stays the cheapest" in page
    # the timestamp
    stamps = {(r["provider"], r["variant"]): r for r in benchmarks["stamps"]}
    system_rows = [stamps[p, "time in the system prompt"] for p in wt.PROVIDERS]
    assert all(r["hit"] == 0.0 for r in system_rows) and "nothing is ever cached" in page
    moved = [stamps[p, "time before the last user message"] for p in wt.PROVIDERS]
    kept = {f"{r['hit']:.0%}" for r in moved}
    assert len(kept) == 1 and f"which keeps {kept.pop()} of the prompt cached" in page
    times = [
        f"{s['cost'] / m['cost']:.1f} × less on {name} ({s['cost']:.4f} → {m['cost']:.4f} $)"
        for name, s, m in zip(("DeepSeek", "OpenAI", "Anthropic"), system_rows, moved, strict=True)
    ]
    assert f"the session costs {times[0]}, {times[1]} and {times[2]}" in page
    bound = [m["cost"] / stamps[m["provider"], "constant placeholder"]["cost"] - 1 for m in moved]
    assert (
        f"within {min(bound):.0%} to {max(bound):.0%} of the constant-placeholder bound".replace(
            "% to", " to"
        )
        in page
    )


# ----------------------------------------------------------------------------------------------------
# The real DeepSeek runs, as the other pages state them (the README's and the analysis guide's table
# are checked above).


@pytest.fixture(scope="module")
def consecutive(real_deepseek: Callable[..., Any]) -> pl.DataFrame:
    return real_deepseek(provider="deepseek").requests


def _page(*parts: str) -> str:
    return _flat((ROOT / "docs").joinpath(*parts).read_text(encoding="utf-8"))


def test_the_real_log_hit_ratios_the_pages_state(consecutive: pl.DataFrame) -> None:
    real = consecutive
    predicted = real["predicted_cached_tokens"].sum() / real["prompt_tokens"].sum()
    reported = real["reported_cached_tokens"].sum() / real["reported_prompt_tokens"].sum()
    exact = int((real["prompt_tokens"] == real["reported_prompt_tokens"]).sum())
    assert exact == real.height
    index = _page("index.md")
    assert (
        f"({real.height} calls, in `fixtures/real-logs/deepseek`), promptkit's token counts equal DeepSeek's on every call"
        in index
    )
    assert f"the predicted hit ratio is {predicted:.1%} against the {reported:.1%} DeepSeek reported" in index
    runs = {2: "two", 3: "three", 4: "four"}[real["session"].n_unique()]
    assert f"On {runs} real DeepSeek agent runs ({real.height} calls," in index
    # your-own-logs: each run's first request read the head every run shares from DeepSeek's cache
    (first_hit,) = set(real.filter(pl.col("index") == 0)["reported_cached_tokens"].to_list())
    assert f"The first request of each of these runs hit {first_hit} tokens on DeepSeek's side" in _flat(
        _page("tutorials", "your-own-logs.md")
    )
    assert f"equals the reported `prompt_tokens` of all {real.height}" in _page("guide", "tokenization.md")
    assert (
        f"the bound is {predicted:.1%} of the prompt tokens while DeepSeek reported {reported:.1%}"
        in _page("how-to", "calibration.md")
    )
    assert f"(mini-swe-agent, {predicted:.1%} predicted hit ratio)" in _flat(WHAT_IF)
    # your-own-logs: the pvlib run's prediction above its report
    pvlib = real.filter(pl.col("session").str.contains("pvlib"))
    above = (
        pvlib["predicted_cached_tokens"].sum() / pvlib["prompt_tokens"].sum()
        - pvlib["reported_cached_tokens"].sum() / pvlib["reported_prompt_tokens"].sum()
    )
    # ... because on some of its calls DeepSeek served an older entry than the previous prompt + answer
    pvlib = pvlib.sort("index")
    through = (pvlib["reported_prompt_tokens"] + pvlib["reported_completion_tokens"]) // 64 * 64
    older = int((pvlib["reported_cached_tokens"][1:] != through[:-1]).sum())
    assert (
        f"the prediction is {above * 100:.1f} points above the report: DeepSeek's cache is best effort, and on "
        f"{older} of its calls it served an older entry" in _page("tutorials", "your-own-logs.md")
    )


def test_what_the_numbers_say_in_the_analysis_guide(consecutive: pl.DataFrame, real: pl.DataFrame) -> None:
    """The bullets under the real-log table of docs/guide/analysis.md."""
    simulated, real = real, consecutive.sort("session", "index")
    guide = _flat(ANALYSIS_GUIDE)
    assert f"equals DeepSeek's `prompt_tokens` on all {real.height} calls" in guide
    assert (real["prompt_tokens"] == real["reported_prompt_tokens"]).all()
    assert (real["completion_tokens"] == real["reported_completion_tokens"] + 1).all()
    assert "each answer is `completion_tokens` + 1" in guide
    v3 = analyze(
        ROOT / "fixtures" / "real-logs" / "deepseek", provider="deepseek", render="deepseek-v3"
    ).requests
    short = 1 - v3["prompt_tokens"].sum() / v3["reported_prompt_tokens"].sum()
    assert f"falls {short:.0%} short" in guide
    # answer inclusion: the hit is the previous prompt + answer, rounded down to 64
    previous = real.select(
        "session",
        (pl.col("index") + 1).alias("index"),
        pl.col("reported_prompt_tokens").alias("previous_prompt"),
        pl.col("reported_completion_tokens").alias("previous_answer"),
    )
    later = real.join(previous, on=["session", "index"]).with_columns(
        ((pl.col("previous_prompt") + pl.col("previous_answer")) // 64 * 64).alias("through_answer")
    )
    through = later.filter(pl.col("reported_cached_tokens") == pl.col("through_answer"))
    assert (
        f"on {through.height} of {later.height} later calls the hit equals the previous prompt + answer"
        in guide
    )
    example = later.filter(pl.col("session").str.contains("pvlib-python-1072") & (pl.col("index") == 2)).row(
        0, named=True
    )
    p, a, hit = example["previous_prompt"], example["previous_answer"], example["reported_cached_tokens"]
    assert hit == example["through_answer"]
    assert f"(pvlib-1072 call 2: {p} + {a} = {p + a} → call 3 hit {hit} = {hit // 64} × 64)" in guide
    others = later.filter(pl.col("reported_cached_tokens") != pl.col("through_answer"))
    in_pvlib = others.filter(pl.col("session").str.contains("pvlib-python-1072")).height
    assert f"On the other {others.height} later calls ({in_pvlib} of them in pvlib-1072" in guide
    gaps = []
    for frame in (real, simulated):
        gaps.append(
            frame["predicted_cached_tokens"].sum() / frame["prompt_tokens"].sum()
            - frame["reported_cached_tokens"].sum() / frame["reported_prompt_tokens"].sum()
        )
    assert (
        f"That is the whole of the aggregate gap ({gaps[0]:.3f} in the consecutive view, {gaps[1]:.3f} in the "
        "simulated one)" in guide
    )
    firsts = set(real.filter(pl.col("index") == 0)["reported_cached_tokens"].to_list())
    assert len(firsts) == 1 and f"Every first call hit {firsts.pop()} tokens" in guide


# ----------------------------------------------------------------------------------------------------
# What the `promptkit whatif` commands on docs/how-to/what-if.md print, run as shown.


def _shown_commands(text: str) -> list[tuple[list[str], str]]:
    """(argv, output) of each one-command ```bash block followed by a ```text block (its output)."""
    import itertools
    import shlex

    from tests.test_docs import code_blocks

    blocks = list(code_blocks(text))
    return [
        (shlex.split(block.code.strip())[1:], after.code)
        for block, after in itertools.pairwise(blocks)
        if block.language == "bash" and after.language == "text" and len(block.code.strip().splitlines()) == 1
    ]


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_the_whatif_commands_print_what_the_page_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from promptkit import cli
    from tests.test_docs import code_blocks

    monkeypatch.chdir(ROOT)
    runs = _shown_commands(WHAT_IF)
    assert [argv[:2] for argv, _ in runs] == [["whatif", "fixtures/logs/session-before.jsonl"]] * 2
    # what `--suggest` prints on the real runs is shown without its command: the first text block after
    # the paragraph that names them
    where = WHAT_IF[: WHAT_IF.index("On the real DeepSeek trajectories in `fixtures/real-logs/deepseek`")]
    after = [b for b in code_blocks(WHAT_IF) if b.language == "text" and b.line > where.count("\n") + 1]
    runs.append((["whatif", "fixtures/real-logs/deepseek", "--suggest"], after[0].code))
    for argv, expected in runs:
        out, err = io.StringIO(), io.StringIO()
        assert cli.main(argv, stdout=out, stderr=err) == 0, err.getvalue()
        assert out.getvalue() == expected, f"promptkit {' '.join(argv)}"


@pytest.mark.slow
def test_the_replay_of_the_moved_contributors_against_the_log_built_that_way() -> None:
    """what-if.md: the replay with the four contributors moved predicts 91.0%; the log assembled that
    way measures 90.7%, its prompts 0.5% longer."""
    from promptkit.formats import read_logs
    from promptkit.whatif import parse_transform, replay

    keys = ("file-list", "memory-vector", "speaker-profile", "cross-session")
    page = _flat(WHAT_IF)
    assert f"four contributors ({', '.join(f'`{k}`' for k in keys)})" in page
    w = replay(
        read_logs(ROOT / "fixtures" / "logs" / "session-before.jsonl"),
        [parse_transform(f"move:key={k},as=user") for k in keys],
    )
    built = analyze(ROOT / "fixtures" / "logs" / "session-after.jsonl")
    assert w.after.hit_ratio is not None and built.hit_ratio is not None
    longer = built.requests["prompt_tokens"].sum() / w.overall["after_prompt_tokens"] - 1
    assert (
        f"predicts a hit ratio of {w.after.hit_ratio:.1%}; the log built that way measures "
        f"{built.hit_ratio:.1%} (its prompts are {longer:.1%} longer" in page
    )


# ----------------------------------------------------------------------------------------------------
# Figures the prose repeats from a page's own examples.


def test_the_tour_prose_states_what_its_examples_compute(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_docs import RUN_LANGUAGES, _example_dir, _run_pycon, _run_python, code_blocks

    text = (ROOT / "docs" / "tutorials" / "tour.md").read_text(encoding="utf-8")
    monkeypatch.chdir(_example_dir(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    globs: dict[str, Any] = {"__name__": "__docs__"}
    for block in code_blocks(text):
        if block.language in RUN_LANGUAGES and not block.skipped:
            failure = (_run_pycon if block.language == "pycon" else _run_python)(block, "tour.md", globs)
            assert failure is None, failure
    result, broken = globs["result"], globs["broken"]
    cached = set(broken.requests.filter(pl.col("index") > 0)["predicted_cached_tokens"].to_list())
    assert len(cached) == 1
    before, after = f"{result.hit_ratio:.1%}", f"{broken.hit_ratio:.1%}"
    assert (
        f"only the {cached.pop()} tokens before it are cached: the hit ratio falls from {before} to {after}"
        in _flat(text)
    )
    assert f"watches the hit ratio fall from {before} to {after}" in _page(
        "concepts", "anchors-and-placement.md"
    )


# ----------------------------------------------------------------------------------------------------
# Figures the pages take from the code's own constants and price tables.


def test_the_constants_the_pages_state() -> None:
    from promptkit.assembly.registry import DEFAULT_BUILD_TIMEOUT, SLOW_STEP_SECONDS
    from promptkit.providers.anthropic import anthropic_min_cacheable_tokens
    from promptkit.report import resolve_prices
    from promptkit.whatif import suggestions

    contributors = _page("how-to", "contributors.md")
    assert f"## The default timeout: {DEFAULT_BUILD_TIMEOUT:.0f} seconds" in contributors
    assert f"`DEFAULT_BUILD_TIMEOUT` = {DEFAULT_BUILD_TIMEOUT} seconds" in contributors
    assert f"`SLOW_STEP_SECONDS` ({SLOW_STEP_SECONDS} s," in contributors
    # Anthropic's minimum cacheable length, per model as the cache-models page lists them
    m = anthropic_min_cacheable_tokens
    assert (
        f"{m('claude-sonnet-4-5')} tokens for Sonnet 4.5 and Opus 4.1, {m('claude-3-haiku')} for Haiku 3.x and "
        f"Sonnet 4.6, {m('claude-opus-4-5')} for Opus 4.5/4.6 and Haiku 4.5 (unknown models: {m('claude-next')})"
        in _page("concepts", "cache-models.md")
    )
    assert m("claude-opus-4-1") == m("claude-sonnet-4-5") and m("claude-3-5-haiku") == m("claude-sonnet-4-6")
    assert m("claude-opus-4-6") == m("claude-haiku-4-5") == m("claude-opus-4-5")
    # cache models: each default rule and its worked example
    from promptkit.providers.resolve import resolve_cache_model
    from promptkit.tokens.cache_models import CachePlan, PagedBlockCache, UnitPrefixCache

    models = _page("concepts", "cache-models.md")
    deepseek, openai, vllm = UnitPrefixCache(), resolve_cache_model("openai"), PagedBlockCache()
    assert f"**down to whole units of {deepseek.unit} tokens** (3013 shared → " in models
    assert f"(3013 shared → {deepseek.cached_tokens(CachePlan(5000), 3013)} cached)" in models
    assert f"**Nothing below {openai.min_tokens} shared tokens**; above, the cached count grows in " in models
    assert f"**steps of {openai.step}**" in models
    assert f"(1300 shared → {openai.cached_tokens(CachePlan(5000), 1300)} cached)" in models
    assert f"Only **full blocks of {vllm.block_size} tokens** are cached" in models
    # the fuzz run's example count (the hypothesis profile of tests/conftest.py)
    from hypothesis import settings

    fuzz = settings.get_profile("fuzz").max_examples
    bad_inputs = _page("reference", "bad-inputs.md")
    assert f"runs the same properties at {fuzz:,} examples each" in bad_inputs
    assert f"`fuzz` is the {fuzz:,}-example run" in bad_inputs
    # tokenization: the chunk size of long texts and the default bound of the segment cache
    import inspect

    from promptkit.tokens.tokenize import RequestTokenizer
    from promptkit.tokens.tokenizers import ENCODE_CHUNK_CHARS

    tokenization = _page("guide", "tokenization.md")
    assert f"`ENCODE_CHUNK_CHARS` ({ENCODE_CHUNK_CHARS:,} characters)" in tokenization
    bound = inspect.signature(RequestTokenizer).parameters["cache_tokens"].default
    assert f"(default {bound / 1e6:.0f} M token ids;" in tokenization
    # what-if: the 1-hour write price and the greedy chain's threshold
    sonnet = resolve_prices(None)["claude-sonnet-4-5"]
    assert sonnet.cache_write_1h is not None
    page = _flat(WHAT_IF)
    assert f"write price ({sonnet.cache_write_1h / sonnet.cache_miss:.0f} × input;" in page
    assert f"each kept only if it adds at least {suggestions._MIN_GAIN:.0%} to the chain's saving" in page


def test_the_token_estimate_against_cl100k_on_the_real_logs() -> None:
    """guide/assembly.md: estimate_tokens is 0.90 to 0.93 of cl100k_base; the 0.93 is the real agent
    logs (English and code; the 0.90 is measured on Chinese documents the repository does not hold)."""
    from promptkit.analysis import get_tokenizer
    from promptkit.assembly.token_counts import estimate_tokens
    from promptkit.formats import read_logs

    cl100k = get_tokenizer("cl100k_base")
    texts = {
        m["content"]
        for r in read_logs(ROOT / "fixtures" / "real-logs" / "deepseek").records
        for m in r.request["messages"]
        if isinstance(m.get("content"), str)
    }
    ratio = sum(estimate_tokens(t) for t in texts) / sum(len(cl100k.encode(t)) for t in texts)
    assert f"0.90 to {ratio:.2f} of `cl100k_base` on English, code and Chinese" in _page(
        "guide", "assembly.md"
    )


def test_the_quiet_headline_the_cli_reference_shows(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from promptkit import cli

    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "analyze",
        "fixtures/real-logs/deepseek",
        "--quiet",
        "--no-plots",
        "--no-html",
        "--out",
        str(tmp_path),
    ]
    assert cli.main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    headline, *rest = out.getvalue().splitlines()  # exactly one line
    assert f"e.g. `{headline}`" in _page("reference", "cli.md")
    assert rest == []


def test_the_ci_gate_page_shows_what_check_and_lint_print() -> None:
    import io

    from promptkit import cli

    page = (ROOT / "docs" / "how-to" / "ci-gate.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n\$ promptkit (check [^\n]+)\n(.*?)```", page, re.S)
    assert block is not None
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(block.group(1).split(), stdout=out, stderr=err)
    assert code == 1  # the page says the command fails the run
    assert out.getvalue() == block.group(2)
    lint_cmd = re.search(r"`promptkit lint (\S+) --provider (\S+)`", page)
    assert lint_cmd is not None
    from promptkit.report.causes import lint

    table = lint(analyze(ROOT / lint_cmd.group(1), provider=lint_cmd.group(2)))
    assert table.height == 1
    row = table.row(0, named=True)
    said = re.search(
        r"shows the (\w+) at character (\d+) of message (\d+), changing on (\d+) of (\d+) transitions", page
    )
    assert said is not None
    assert (row["kind"], row["offset"], row["message"], row["changes"], row["transitions"]) == (
        said.group(1),
        int(said.group(2)),
        int(said.group(3)),
        int(said.group(4)),
        int(said.group(5)),
    )


def test_the_analysis_guide_s_idle_times_are_what_the_trajectories_give(real: pl.DataFrame) -> None:
    """The seconds between an answer and the next request (the next call's ``created`` minus the
    agent's receipt time of the answer), for later calls where the newest entry was found (reported >=
    predicted) and where it was not."""
    import json

    gaps: dict[bool, list[float]] = {True: [], False: []}
    for path in sorted((ROOT / "fixtures" / "real-logs" / "deepseek").glob("*.traj.json")):
        answers = [
            m
            for m in json.loads(path.read_text(encoding="utf-8"))["messages"]
            if m.get("role") == "assistant"
        ]
        session = real.filter(pl.col("session") == path.name.removesuffix(".traj.json")).sort("index")
        for row in session.filter(pl.col("index") > 0).iter_rows(named=True):
            n = row["index"]
            gap = answers[n]["extra"]["response"]["created"] - answers[n - 1]["extra"]["timestamp"]
            gaps[row["reported_cached_tokens"] >= row["predicted_cached_tokens"]].append(gap)
    found, missed = gaps[True], gaps[False]
    assert (
        f"({min(found):.2f}–{max(found):.2f} s between answer and next request when the entry was found,\n"
        f"  {min(missed):.2f}–{max(missed):.2f} s when it was not)"
    ) in ANALYSIS_GUIDE


@pytest.mark.slow
def test_the_benchmark_corpus_is_what_the_pages_say(tmp_path: pathlib.Path) -> None:
    """The corpus of benchmarks/corpus.py (default arguments), as the performance and cluster pages
    describe it: files, size, requests and the prompt tokens each provider counts."""
    from benchmarks.corpus import write_corpus
    from promptkit.analysis.api import analyze_requests
    from promptkit.formats import read_logs

    files = write_corpus(tmp_path / "corpus")
    size = sum(f.stat().st_size for f in files)
    loaded = read_logs([tmp_path / "corpus"])
    cl100k = analyze_requests(loaded, provider="openai", tokenizer="cl100k_base").requests
    deepseek = analyze_requests(loaded, provider="deepseek").requests
    performance = (ROOT / "docs" / "concepts" / "performance.md").read_text(encoding="utf-8")
    cluster = (ROOT / "docs" / "how-to" / "cluster.md").read_text(encoding="utf-8")
    n = cl100k.height
    assert cl100k["session"].n_unique() == len(files) == 20
    assert f"{size / 1e6:.0f} MB of promptkit JSONL" in performance
    assert f"the same {n:,}-request corpus" in performance
    assert (
        f"| phase ({n:,} requests) | chatml + cl100k_base ({cl100k['prompt_tokens'].sum() / 1e6:.1f}M tokens) |"
        in performance
    )
    assert f"DeepSeek-V3.2 + tokenizer ({deepseek['prompt_tokens'].sum() / 1e6:.1f}M tokens) |" in performance
    assert (
        f"{len(files)} sessions, {n:,} requests, prompts growing to 30–60k tokens, {size / 1e6:.0f} MB"
        in _flat(cluster)
    )


def test_the_report_and_format_pages_state_what_the_fixtures_give() -> None:
    """guide/reports.md (the largest break of the bundled "before" log, the excerpt size, the session count
    past which the hit-ratio plot draws a band), formats/claude-code.md (the fixture's first call read from
    a cache written by an earlier session) and formats/codex.md (its token_count lines and calls)."""
    import json

    from promptkit.analysis.wire import EXCERPT_TOKENS
    from promptkit.formats import read_logs
    from promptkit.report import largest_breaks
    from promptkit.report.plot_png import MANY_SESSIONS

    reports = _flat(_page("guide", "reports.md"))
    top = largest_breaks(analyze(ROOT / "fixtures" / "logs" / "session-before.jsonl"), n=1).row(0, named=True)
    assert (
        f"its first row is `{top['slot']} / {top['key']}`, cached `{top['cached_text']}`, sent "
        f"`{top['prompt_text']}`" in reports
    )
    assert f"sent its file list, {top['tokens_lost']:,} tokens before the end" in reports
    assert f"{EXCERPT_TOKENS} tokens each, columns of `result.requests`" in reports
    assert f"over {MANY_SESSIONS} sessions, the per-turn median and 10–90 % band" in reports

    claude = analyze(ROOT / "fixtures" / "claude-code").requests.sort("timestamp")
    assert claude["index"][0] == 0 and claude["reported_cached_tokens"][0] > 0
    assert (
        f"the fixture's first call read {claude['reported_cached_tokens'][0]:,} tokens from the cache"
        in _flat(_page("how-to", "formats", "claude-code.md"))
    )

    (rollout,) = (ROOT / "fixtures" / "codex").rglob("*.jsonl")
    counts = sum(
        1
        for line in rollout.read_text(encoding="utf-8").splitlines()
        if line.strip() and json.loads(line).get("payload", {}).get("type") == "token_count"
    )
    calls = len(read_logs(rollout).records)
    assert f"(the fixture has {counts} `token_count` lines and {calls} calls)" in _flat(
        _page("how-to", "formats", "codex.md")
    )


def test_the_cluster_page_s_100m_estimate_follows_from_its_measurements() -> None:
    """docs/how-to/cluster.md, "100M requests, on paper": the simulated view's coordinator rate is
    read from its measurement on that page (requests and seconds of coordinator CPU, measured by
    ``benchmarks/scaling.py``), and the rounded rate and the hours for 100M requests are recomputed."""
    page = _flat((ROOT / "docs" / "how-to" / "cluster.md").read_text(encoding="utf-8"))
    found = re.search(
        r"about ([\d,]+) requests per second here \(([\d,]+) requests in ([\d.]+) s of its CPU\)", page
    )
    assert found is not None
    stated, requests, seconds = (float(g.replace(",", "")) for g in found.groups())
    rate = requests / seconds
    assert stated == float(f"{rate:.2g}"), (stated, rate)  # "about": two significant figures
    hours = f"{100e6 / stated / 3600:.0f}"
    assert f"That is about {hours} hour{'' if hours == '1' else 's'} for 100M requests" in page
