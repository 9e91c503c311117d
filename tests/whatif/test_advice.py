"""The advice engine: lint's fixes hold when followed, and suggestions that lose money rank last."""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

import pytest

from promptkit.cli import main
from promptkit.formats import read_logs
from promptkit.layout import RequestRecord
from promptkit.whatif import Breakpoints, apply_transforms, lint_advice, rank, suggest

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "promptkit" / "data" / "default-session.jsonl"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_following_the_first_lint_finding_as_printed_gives_the_promised_hit_ratio() -> None:
    code, out, err = _run(["lint"])  # the bundled log, as the README writes it
    assert code == 0 and "no PATH given, analyzing the bundled log" in err
    first = out.split("\n2. ")[0]
    command = next(line.strip() for line in first.splitlines() if line.strip().startswith("promptkit whatif"))
    promised = re.search(r"measured by replay: hit ratio ([\d.]+)% → ([\d.]+)%", first)
    assert promised, first
    before, after = float(promised.group(1)), float(promised.group(2))
    assert after > before + 40  # the fix is the complete set of changes, not the one move that saves 0.1 pp
    argv = shlex.split(command)[1:]
    code, replayed, _ = _run([*argv, "--json"])
    assert code == 0
    overall = json.loads(replayed)["overall"]
    assert abs(100 * overall["after_hit_ratio"] - after) < 0.5
    assert abs(100 * overall["before_hit_ratio"] - before) < 0.5


@pytest.mark.slow
def test_every_lint_finding_has_a_measured_fix_or_says_it_saves_nothing() -> None:
    advice = lint_advice(read_logs(BUNDLED))
    assert advice.items
    for item in advice.items:
        assert item.fix is not None
        assert item.saves == (item.fix.saving_usd > 0 or item.fix.hit_gain > 0)
        assert item.to_json()["fix"]["specs"] == item.fix.specs()


RULES = "Answer in English. Cite the file and line of every claim. Keep the answer short. " * 60


def _anthropic_log() -> list[RequestRecord]:
    """Calls with breakpoints whose system prompt starts with the time: calls a minute apart reuse the
    cache once the time is normalized; after a 10-minute gap the time has changed anyway, so a 1-hour
    TTL only makes the writes dearer."""
    gaps = [0.0, 60.0, 660.0, 720.0, 1320.0, 1380.0]
    out = []
    for i, t in enumerate(gaps):
        stamp = f"2026-01-01 10:{int(t // 60):02d}"
        out.append(
            RequestRecord(
                {
                    "model": "claude-sonnet-4-5",
                    "system": f"Current time: {stamp}\n{RULES}",
                    "messages": [{"role": "user", "content": f"question {i}"}],
                },
                session="a",
                index=i,
                provider="anthropic",
                timestamp=1_767_225_600.0 + t,
                completion={"role": "assistant", "content": f"answer {i}"},
            )
        )
    return apply_transforms(out, [Breakpoints(("head",))])


def test_a_suggestion_that_loses_money_never_ranks_above_one_that_saves() -> None:
    found = suggest(_anthropic_log(), tokenizer="cl100k_base")
    ttl = [s for s in found if "1-hour" in s.transform.describe() or "ttl" in s.spec]
    assert ttl and all(s.saving_usd < 0 and s.is_cost for s in ttl)  # a longer TTL loses money here
    assert ttl[0].tradeoff is not None and "5 minutes to 1 hour" in ttl[0].tradeoff
    assert any(s.saving_usd > 0 for s in found)
    savings = [s.saving_usd for s in found]
    first_cost = next(i for i, s in enumerate(savings) if s < 0)
    assert all(s >= 0 for s in savings[:first_cost]) and all(s < 0 for s in savings[first_cost:])
    # rank is the order, whatever order they come in
    assert [s.spec for s in rank(reversed(found))] == [s.spec for s in found]


def test_whatif_suggest_shows_costs_apart_with_their_trade_off(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(json.dumps(r.to_json()) + "\n" for r in _anthropic_log()), encoding="utf-8")
    code, out, _ = _run(["whatif", str(log), "--suggest"])
    assert code == 0
    gains, _, costs = out.partition("Costs: these lose money on this log")
    assert "trade-off:" in costs and "ttl:1h" in costs and "ttl:1h" not in gains
    code, out, _ = _run(["whatif", str(log), "--suggest", "--json"])
    document = json.loads(out)
    assert all(s["saving_usd"] >= 0 for s in document["suggestions"])
    assert document["costs"] and all(s["saving_usd"] < 0 and s["tradeoff"] for s in document["costs"])


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_analyze_advice_gives_each_break_a_fix_that_holds(tmp_path: Path) -> None:
    code, out, _ = _run(["analyze", "--advice", "--json", "--no-plots", "--out", str(tmp_path)])
    assert code == 0
    fixes = json.loads(out)["break_fixes"]
    assert fixes and all(f["command"] for f in fixes)
    first = fixes[0]
    code, replayed, _ = _run([*shlex.split(first["command"])[1:], "--json"])
    assert abs(json.loads(replayed)["overall"]["after_hit_ratio"] - first["after_hit_ratio"]) < 0.005
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.count('class="meta fix">fix: ') == len(fixes)


def _fix(transform: object, *, priced: bool, before: float, after: float, hits: tuple[float | None, float | None]):  # type: ignore[no-untyped-def]
    from promptkit.whatif.suggestions import Suggestion

    return Suggestion(transform, "spec", "why", hits[0], hits[1], 100, 100, before, after, None, priced=priced)  # type: ignore[arg-type]


def test_saves_means_a_measured_saving_or_hit_gain_and_an_unpriced_cost_is_no_saving() -> None:
    from promptkit.whatif.advice import Advice
    from promptkit.whatif.transforms.moves import Move, Selector

    move = Move(Selector(key="k"))
    # unpriced: its cost figures are placeholders; only a hit-ratio gain counts
    assert not Advice({}, _fix(move, priced=False, before=1.0, after=0.0, hits=(0.5, 0.5))).saves
    assert Advice({}, _fix(move, priced=False, before=0.0, after=0.0, hits=(0.5, 0.6))).saves
    assert not Advice({}, _fix(move, priced=False, before=0.0, after=0.0, hits=(None, 0.9))).saves
    # priced: a saving counts even when the hit ratio does not move; a hit gain counts too
    assert Advice({}, _fix(move, priced=True, before=1.0, after=0.5, hits=(0.5, 0.5))).saves
    assert Advice({}, _fix(move, priced=True, before=1.0, after=1.0, hits=(0.5, 0.6))).saves
    assert not Advice({}, _fix(move, priced=True, before=1.0, after=1.0, hits=(0.5, 0.5))).saves
    assert not Advice({}, None).saves


def test_a_fix_is_credited_only_to_the_finding_it_acts_on() -> None:
    from promptkit.whatif.advice import fix_for
    from promptkit.whatif.transforms.moves import Move, Selector
    from promptkit.whatif.transforms.tools import SortTools
    from promptkit.whatif.transforms.volatile import Normalize

    def fix(t: object, saving: float = 0.5):  # type: ignore[no-untyped-def]
        return _fix(t, priced=True, before=1.0, after=1.0 - saving, hits=(0.5, 0.6))

    mine, other = fix(Move(Selector(key="k")), 0.1), fix(Move(Selector(key="other")), 0.9)
    assert fix_for({"key": "k", "change_class": "volatile_value"}, [other]) is None
    assert fix_for({"key": "k", "change_class": "volatile_value"}, [other, mine]) is mine
    # a finding without a key: a volatile value is fixed by a move or a normalize, not by sorting tools
    norm, sort = fix(Normalize(("uuids",))), fix(SortTools())
    assert fix_for({"key": None, "change_class": "volatile_value"}, [sort]) is None
    assert fix_for({"key": None, "change_class": "volatile_value"}, [sort, norm]) is norm
    assert fix_for({"key": None, "change_class": "reordered"}, [norm]) is None
    assert fix_for({"key": None, "change_class": "reordered"}, [norm, sort]) is sort
    assert fix_for({"key": None, "change_class": "whitespace"}, [sort]) is None
    assert fix_for({"key": None, "change_class": "whitespace"}, [sort, norm]) is norm
    # a move of a keyed contributor is no fix of the keyless volatile finding's key either way
    assert fix_for({"key": "k", "change_class": "reordered"}, [other]) is None
