"""promptkit.codelint beyond the corpus: ignore comments, notes where the analysis gives up, imports
within a package, the outputs (text, JSON, SARIF 2.1.0 with codeFlows) and the command's exit codes."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from promptkit.cli import main
from promptkit.codelint import lint_code, lint_code_result
from promptkit.errors import CodeInputError

CORPUS = Path(__file__).resolve().parents[1] / "lint_code"

SYSTEM_CLOCK = """\
import time
from openai import OpenAI
client = OpenAI()
def ask(q):
    stamp = time.time(){source_comment}
    client.chat.completions.create(model="m", messages=[
        {{"role": "system", "content": f"t={{stamp}}"}},{sink_comment}
        {{"role": "user", "content": q}}])
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["lint-code", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("source_comment", "sink_comment", "found"),
    [
        ("", "", 1),
        ("  # promptkit: ignore[clock]", "", 0),
        ("", "  # promptkit: ignore[clock]", 0),
        ("  # promptkit: ignore", "", 0),
        ("  # promptkit: ignore[set-order]", "", 1),
    ],
)
def test_an_ignore_comment_silences_its_rule_on_the_source_or_the_request_line(
    tmp_path: Path, source_comment: str, sink_comment: str, found: int
) -> None:
    path = write(
        tmp_path, "bot.py", SYSTEM_CLOCK.format(source_comment=source_comment, sink_comment=sink_comment)
    )
    result = lint_code_result([path])
    assert len(result.findings) == found
    assert result.ignored == 1 - found


def test_a_dynamic_call_is_a_note_and_never_a_finding(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.py",
        """\
        from openai import OpenAI
        client = OpenAI()
        def ask(builders, name, q):
            system = getattr(builders, name)()
            client.chat.completions.create(model="m", messages=[
                {"role": "system", "content": system}, {"role": "user", "content": q}])
    """,
    )
    result = lint_code_result([path])
    assert result.findings == ()
    assert [(n.line, "gave up on the dynamic call" in n.message) for n in result.notes] == [(4, True)]


def test_a_list_of_unknown_order_is_a_note(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.py",
        """\
        import json, uuid
        from openai import OpenAI
        client = OpenAI()
        def ask(raw):
            messages = json.loads(raw) + [] if False else json.loads(raw + str(uuid.uuid4()))
            client.chat.completions.create(model="m", messages=messages)
    """,
    )
    result = lint_code_result([path])
    assert result.findings == ()
    assert len(result.notes) == 1 and "order is not known" in result.notes[0].message


def test_relative_imports_and_module_attributes_within_a_package(tmp_path: Path) -> None:
    write(tmp_path, "app/__init__.py", "")
    write(tmp_path, "app/prompts/__init__.py", "")
    write(
        tmp_path,
        "app/prompts/system.py",
        """\
        import random
        def persona():
            return "You are " + random.choice(["kind", "terse"])
    """,
    )
    write(
        tmp_path,
        "app/bot.py",
        """\
        import anthropic
        from .prompts import system as prompts
        import app.prompts.system as again
        def reply(client: anthropic.Anthropic, q):
            client.messages.create(model="m", max_tokens=9, system=prompts.persona(), messages=[{"role": "user", "content": q}])
            client.messages.create(model="m", max_tokens=9, system=[{"type": "text", "text": again.persona()}], messages=[])
    """,
    )
    found = lint_code([tmp_path])
    assert {(Path(f.path).name, f.line, f.sink.line, f.slot) for f in found} == {
        ("system.py", 3, 5, "system"),
        ("system.py", 3, 6, "system"),
    }


def test_a_recursive_helper_ends(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.py",
        """\
        import time
        import litellm
        def pad(text, n):
            return text if n == 0 else pad(text + " ", n - 1)
        def ask(q):
            litellm.completion(model="m", messages=[{"role": "system", "content": pad(str(time.time()), 3)}, {"role": "user", "content": q}])
    """,
    )
    assert [(f.rule, f.line) for f in lint_code([path])] == [("clock", 6)]


def test_the_flow_names_each_step_from_the_value_to_the_request() -> None:
    (finding,) = lint_code([CORPUS / "f16_sent_by_a_helper"])
    steps = [(Path(s.path).name, s.line) for s in finding.flow]
    assert steps[0] == ("app.py", 9) and steps[-1] == ("llm.py", 9)
    assert ("app.py", 11) in steps and finding.flow[-1].message.startswith("sent as messages")
    assert "after the history" in finding.fix


def test_sarif_is_2_1_0_with_one_code_flow_per_finding(tmp_path: Path) -> None:
    code, out, _ = run_cli("--format", "sarif", str(CORPUS / "f02_helper_in_other_module"))
    assert code == 1
    log = json.loads(out)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    (result,) = run["results"]
    assert rules[result["ruleIndex"]] == result["ruleId"] == "clock"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 9
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    files = [Path(step["location"]["physicalLocation"]["artifactLocation"]["uri"]).name for step in flow]
    assert files[0] == "prompts.py" and files[-1] == "main.py" and len(flow) >= 3
    assert result["properties"]["slot"] == "system"


def test_json_lists_findings_and_notes() -> None:
    code, out, _ = run_cli("--format", "json", str(CORPUS / "f09_process_facts.py"))
    document = json.loads(out)
    assert code == 1 and document["files"] == 1
    assert [(f["rule"], f["line"]) for f in document["findings"]] == [("process", 10), ("process", 11)]
    assert document["findings"][0]["flow"][0]["line"] == 10


def test_exit_codes_text_output_and_bad_input(tmp_path: Path) -> None:
    code, out, _ = run_cli(str(CORPUS / "f01_clock_through_variable.py"))
    assert code == 1 and "f01_clock_through_variable.py:9:" in out and "fix: " in out
    code, out, _ = run_cli(str(CORPUS / "c02_sorted_set.py"), str(CORPUS / "c04_sort_keys.py"))
    assert code == 0 and out.endswith("2 files, no changing value before repeated content\n")
    code, _, err = run_cli(str(tmp_path / "missing"))
    assert code == 2 and "missing: no such file or directory" in err
    bad = write(tmp_path, "broken.py", "x = 1\ndef f(:\n")
    code, _, err = run_cli(str(bad))
    assert code == 2 and f"{bad}:2: syntax error" in err and "Traceback" not in err
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"x = '\xe9'\n")
    with pytest.raises(CodeInputError, match=r"latin\.py: not UTF-8"):
        lint_code([latin])


def test_the_pre_commit_hook_runs_this_command_on_the_whole_tree() -> None:
    import yaml

    from promptkit.cli import build_parser

    (hook,) = yaml.safe_load((CORPUS.parents[1] / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "promptkit-lint-code" and hook["language"] == "python"
    program, command = hook["entry"].split()
    assert program == "promptkit" and hook["pass_filenames"] is False and hook["args"] == ["."]
    assert build_parser().parse_args([command, *hook["args"]]).handler.__name__ == "_run_lint_code"


def test_a_default_argument_reaches_a_request_in_a_function_nobody_in_the_project_calls(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "handler.py",
        """\
        import time
        from openai import OpenAI
        client = OpenAI()
        def handler(q, started=time.time()):
            client.chat.completions.create(model="m", messages=[
                {"role": "system", "content": f"up since {started}"}, {"role": "user", "content": q}])
    """,
    )
    (finding,) = lint_code([path])
    assert (finding.rule, finding.line, finding.slot) == ("clock", 4, "messages[0] (system message)")
    assert "default of parameter `started`" in [step.message for step in finding.flow]


def test_the_output_does_not_depend_on_hash_order() -> None:
    import os
    import subprocess
    import sys

    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-m", "promptkit", "lint-code", "--format", "json", str(CORPUS)],
            capture_output=True, text=True, env=env, cwd=CORPUS.parents[1], check=False,
        )  # fmt: skip
        assert run.returncode == 1, run.stderr
        outputs.add(run.stdout)
    assert len(outputs) == 1


def test_a_parameter_named_like_the_users_message_is_what_its_callers_pass(tmp_path: Path) -> None:
    """``message`` of a helper called with a constant is not the turn's input; ``question`` of a
    function no call of the project reaches (an entry point) is."""
    path = write(
        tmp_path,
        "bot.py",
        """\
        from openai import OpenAI
        client = OpenAI()
        def system_message(message):
            return {"role": "system", "content": message}
        def ask(history, text):
            return client.chat.completions.create(model="m", messages=[system_message("Be brief."), *history, {"role": "user", "content": text}])
        def ask_about(history, question):
            return client.chat.completions.create(model="m", messages=[system_message(question), *history])
    """,
    )
    found = lint_code([path])
    assert [(f.rule, f.line, f.sink.line, f.source) for f in found] == [
        ("per-turn", 7, 8, "parameter `question` of `ask_about()` (the turn's input)")
    ]
