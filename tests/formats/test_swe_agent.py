"""Tests for promptkit.formats.swe_agent: SWE-agent ``.traj`` trajectories."""

from __future__ import annotations

import doctest
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from promptkit.formats import read_logs, swe_agent

WITH_QUERY = Path("fixtures/swe_agent/swe-agent-test-repo-i1.traj")
WITHOUT_QUERY = Path("fixtures/swe_agent/6e44b9__sweagenttestrepo-1c2844.traj")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_module_doctests() -> None:
    result = doctest.testmod(swe_agent)
    assert result.failed == 0 and result.attempted > 0


def test_every_step_is_a_call_whose_request_is_its_query() -> None:
    data = load(WITH_QUERY)
    result = read_logs(WITH_QUERY)
    assert result.formats == {"swe-agent": 1} and result.problems == ()
    assert len(result.records) == len(data["trajectory"]) == 5
    assert [r.session for r in result.records] == ["swe-agent-test-repo-i1"] * 5
    for record, step in zip(result.records, data["trajectory"], strict=True):
        query = step["query"]
        assert [m["role"] for m in record.request["messages"]] == [m["role"] for m in query]
        assert [m["content"] for m in record.request["messages"]] == [m["content"] for m in query]
        for message in record.request["messages"]:
            assert not {"agent", "message_type", "thought", "action", "tool_call_ids"} & set(message)
    third = result.records[2].request["messages"]
    assert third[3] == {
        "role": "tool",
        "content": third[3]["content"],
        "tool_call_id": "call_fJuazlMUN5fQDQ73G6XSpYpx",
    }
    assert third[2]["tool_calls"][0]["function"] == {
        "name": "find_file",
        "arguments": '{"file_name":"missing_colon.py"}',
    }
    assert result.records[0].request["model"] == "gpt-4o" and result.records[0].provider == "openai"
    # the completion is the step's assistant message, with its tool call
    completion = result.records[1].completion
    assert completion is not None and completion["tool_calls"][0]["id"] == "call_OhmPHGZp0XJ6JRnNkQaYcBMs"
    assert result.records[4].completion == {"role": "assistant", "content": data["trajectory"][4]["response"]}
    assert result.records[0].meta["model_stats"]["api_calls"] == 5
    assert all(r.usage is None for r in result.records)


def test_trajectories_without_query_are_rebuilt_from_history() -> None:
    old, new = read_logs(WITHOUT_QUERY), read_logs(WITH_QUERY)
    assert old.problems == ()
    assert [r.request for r in old.records] == [r.request for r in new.records]
    assert [r.meta["query"] for r in old.records] == ["history"] * 5
    # the last step's assistant message never reached the history: its request is the whole history
    assert len(old.records[-1].request["messages"]) == len(load(WITHOUT_QUERY)["history"])


def test_a_malformed_query_is_a_problem_naming_step_message_and_field(tmp_path: Path) -> None:
    data = load(WITH_QUERY)
    del data["trajectory"][1]["query"][1]["role"]
    data["trajectory"][3] = "not a step"
    path = tmp_path / "broken.traj"
    path.write_text(json.dumps(data))
    result = read_logs(path)
    assert len(result.records) == 3
    reasons = sorted(p.reason for p in result.problems)
    assert all(p.file == str(path) for p in result.problems)
    assert reasons[0].startswith("trajectory[1].query[1].role: expected one of system, user, assistant, tool")
    assert reasons[1].startswith("trajectory[3]: expected an object, got str")


def test_sniffing_tells_swe_agent_from_mini_swe_agent(tmp_path: Path) -> None:
    shutil.copy(WITH_QUERY, tmp_path / WITH_QUERY.name)
    mini = sorted(Path("fixtures/real-logs/deepseek").glob("*.traj.json"))[0]
    shutil.copy(mini, tmp_path / mini.name)
    plain_json = tmp_path / "run.json"
    plain_json.write_text(WITHOUT_QUERY.read_text())  # not named .traj: sniffed by its content
    result = read_logs(tmp_path)
    assert result.formats == {"swe-agent": 2, "mini-swe-agent": 1}


def test_gzip_copy_and_invalid_json(tmp_path: Path) -> None:
    packed = tmp_path / "swe-agent-test-repo-i1.traj.gz"
    packed.write_bytes(gzip.compress(WITH_QUERY.read_bytes()))
    compressed = read_logs(packed)
    assert compressed.formats == {"swe-agent": 1}
    assert [r.session for r in compressed.records] == ["swe-agent-test-repo-i1"] * 5
    assert [r.request for r in compressed.records] == [r.request for r in read_logs(WITH_QUERY).records]
    broken = tmp_path / "broken.traj"
    broken.write_text(WITH_QUERY.read_text()[:2000])
    result = read_logs(broken)
    (problem,) = result.problems
    assert result.records == () and problem.line is not None and problem.reason.startswith("invalid JSON")


# --------------------------------------------------------------------- history processors (issue 23)

ELIDED = Path("fixtures/swe_agent/swe-agent-test-repo-i1-elided.traj")


def _without_query(tmp_path: Path, *, processors: list[dict[str, Any]] | None = None) -> Path:
    data = load(ELIDED)
    for step in data["trajectory"]:
        del step["query"]
    if processors is not None:
        config = json.loads(data["replay_config"])
        config["agent"]["history_processors"] = processors
        data["replay_config"] = json.dumps(config)
    path = tmp_path / "elided.traj"
    path.write_text(json.dumps(data))
    return path


def test_an_elision_run_breaks_at_each_elided_tool_output_named_an_edit_of_the_history(
    tmp_path: Path,
) -> None:
    from promptkit.analysis.api import analyze

    for path in (ELIDED, _without_query(tmp_path)):  # the messages sent, and the history rebuilt
        q = analyze(path).requests.sort("index")
        broken = q.filter(q["divergence_message"].is_not_null())
        assert broken["index"].to_list() == [2, 3, 4]  # every step after the second elides one more output
        assert broken["divergence_role"].to_list() == ["tool", "tool", "tool"]
        assert broken["change_class"].to_list() == ["message_edited"] * 3
        assert all("Old environment output" in d for d in broken["change_detail"])


def test_rebuilding_from_the_history_applies_last_n_observations(tmp_path: Path) -> None:
    sent = [r.request["messages"] for r in read_logs(ELIDED).records]
    rebuilt = read_logs(_without_query(tmp_path))
    assert [r.meta["query"] for r in rebuilt.records] == ["history"] * 5
    assert [r.request["messages"] for r in rebuilt.records] == sent
    # SWE-agent's own placeholder text, with the elided output's line count
    history = [m for m in load(ELIDED)["history"] if m.get("agent", "main") == "main"]
    first_tool = next(m for m in history if m["role"] == "tool")
    lines = len(first_tool["content"].splitlines())
    assert sent[2][3]["content"] == f"Old environment output: ({lines} lines omitted)"


def test_an_unknown_history_processor_is_named_in_a_problem(tmp_path: Path) -> None:
    path = _without_query(
        tmp_path, processors=[{"type": "last_n_observations", "n": 1}, {"type": "remove_regex"}]
    )
    result = read_logs(path)
    assert len(result.records) == 5
    [problem] = result.problems
    assert "history processor(s) remove_regex" in problem.reason and problem.file == str(path)
    # the messages really sent need no processor: no problem then
    assert read_logs(ELIDED).problems == ()


def test_a_malformed_history_processor_is_a_problem_naming_its_field(tmp_path: Path) -> None:
    # untrusted replay_config: a count that is not a number, tags that are not strings
    path = _without_query(
        tmp_path,
        processors=[
            {"type": "last_n_observations", "n": None},
            {"type": "last_n_observations", "n": 1, "always_keep_output_for_tags": [["x"]]},
        ],
    )
    result = read_logs(path)
    assert len(result.records) == 5  # read, with the processors left out
    reasons = [p.reason for p in result.problems]
    assert any("history_processors[0].n: expected a whole number >= 0, got None" in r for r in reasons), (
        reasons
    )
    assert any("history_processors[1].always_keep_output_for_tags" in r for r in reasons), reasons
