"""The path of a finding, step by step: each step's file, line and what happens to the value there
(assigned, formatted, stored on ``self``, returned by a helper, read in another method, sent).
Also the finer points of where a value lands (branches, spreads, the Responses input, contributors)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from promptkit.codelint import lint_code

CORPUS = Path(__file__).resolve().parents[1] / "lint_code"

FLOWS = {
    "f02_helper_in_other_module": [[
        ("prompts.py", 9, "clock reading: time.strftime()"), ("prompts.py", 9, "assigned to `stamp`"),
        ("prompts.py", 10, "formatted into an f-string"), ("prompts.py", 10, "returned by `build_system()`"),
        ("main.py", 11, "assigned to `system`"), ("main.py", 12, "sent as system by `messages.create`"),
    ]],
    "f03_attribute_set_in_init.py": [[
        ("f03_attribute_set_in_init.py", 13, "random value or id: uuid.uuid4()"),
        ("f03_attribute_set_in_init.py", 13, "stored in `self.run_id`"),
        ("f03_attribute_set_in_init.py", 14, "formatted into an f-string"),
        ("f03_attribute_set_in_init.py", 14, "concatenated"),
        ("f03_attribute_set_in_init.py", 14, "stored in `self.instructions`"),
        ("f03_attribute_set_in_init.py", 18, "read from `self.instructions`"),
        ("f03_attribute_set_in_init.py", 17, "sent as instructions by `responses.create`"),
    ]],
    "f16_sent_by_a_helper": [[
        ("app.py", 9, "clock reading: datetime.now()"), ("app.py", 9, "assigned to `now`"),
        ("app.py", 10, "formatted into an f-string"), ("app.py", 10, "assigned to `system`"),
        ("app.py", 11, "passed to `chat()`"), ("llm.py", 11, "put in a dict under `content`"),
        ("llm.py", 9, "sent as messages by `chat.completions.create`"),
    ]],
    "f20_appended_before_the_history.py": [
        [
            ("f20_appended_before_the_history.py", 13, "clock reading: time.time()"),
            ("f20_appended_before_the_history.py", 13, "assigned to `started`"),
            ("f20_appended_before_the_history.py", 15, "formatted into an f-string"),
            ("f20_appended_before_the_history.py", 15, "concatenated"),
            ("f20_appended_before_the_history.py", 15, "assigned to `system`"),
            ("f20_appended_before_the_history.py", 18, "put in a dict under `content`"),
            ("f20_appended_before_the_history.py", 21, "returned by `build()`"),
            ("f20_appended_before_the_history.py", 25, "sent as messages by `litellm.completion`"),
        ],
        [
            ("f20_appended_before_the_history.py", 16, "set iteration order: iteration of the set made at line 8"),
            ("f20_appended_before_the_history.py", 16, "formatted into an f-string"),
            ("f20_appended_before_the_history.py", 15, "joined into a string"),
            ("f20_appended_before_the_history.py", 15, "concatenated"),
            ("f20_appended_before_the_history.py", 15, "assigned to `system`"),
            ("f20_appended_before_the_history.py", 18, "put in a dict under `content`"),
            ("f20_appended_before_the_history.py", 21, "returned by `build()`"),
            ("f20_appended_before_the_history.py", 25, "sent as messages by `litellm.completion`"),
        ],
    ],
}  # fmt: skip


@pytest.mark.parametrize("program", sorted(FLOWS))
def test_each_step_of_the_path_is_named(program: str) -> None:
    flows = [[(Path(s.path).name, s.line, s.message) for s in f.flow] for f in lint_code([CORPUS / program])]
    assert flows == FLOWS[program]


def found(tmp_path: Path, source: str) -> list[tuple[str, int, str]]:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return [(f.rule, f.line, f.slot) for f in lint_code([path])]


HEAD = (
    "import time, random, re\nfrom datetime import datetime\nfrom openai import OpenAI\nclient = OpenAI()\n"
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # the Responses input: a string is the turn's text; a list's entries before the turn repeat
        ("def f(q):\n    client.responses.create(model='m', input=f'{time.time()} {q}')\n", []),
        (
            "def f(q):\n    client.responses.create(model='m', input=[{'role': 'system', 'content': str(time.time())}, q])\n",
            [("clock", 6, "input[0] (system message)")],
        ),
        # time.strftime with a time tuple formats that time; a seeded generator repeats itself
        ("T = (2024, 1, 1, 0, 0, 0, 0, 1, 0)\ndef f(q):\n    client.responses.create(model='m', instructions=time.strftime('%Y', T), input=q)\n", []),
        ("R = random.Random(7)\ndef f(q):\n    client.responses.create(model='m', instructions=R.choice(['a', 'b']), input=q)\n", []),
        # parameter names: system_prompt and text are not the user's message; user_text is
        ("def f(system_prompt, text):\n    client.responses.create(model='m', instructions=system_prompt + text, input='x')\n", []),
        (
            "def f(user_text):\n    client.responses.create(model='m', instructions=user_text, input='x')\n",
            [("per-turn", 5, "instructions")],
        ),
        # retrieval: a memory's search is this turn's; re.search and a cursor are not
        (
            "def f(memory, q):\n    client.responses.create(model='m', instructions=str(memory.search(q)), input=q)\n",
            [("per-turn", 6, "instructions")],
        ),
        ("def f(cursor, session, q):\n    client.responses.create(model='m', instructions=str(re.search('a', 'b')) + str(cursor.execute('x'))"
         " + str(lookup(q)) + str(session.query(q)), input=q)\n", []),
        # a system message built in two branches keeps its role
        (
            "def f(q, late):\n    if late:\n        s = {'role': 'system', 'content': f'{datetime.now()}'}\n    else:\n"
            "        s = {'role': 'system', 'content': 'hi'}\n    client.chat.completions.create(model='m', messages=[s, q])\n",
            [("clock", 7, "messages[0] (system message)")],
        ),
        # after a history spread first in the list: the turn (the user's message, a prefill) is fine
        ("def f(history, question):\n    client.chat.completions.create(model='m', messages=[*history, {'role': 'user', 'content': question}, {'role': 'assistant', 'content': str(time.time())}])\n", []),
        # without a spread, a few-shot example before the turn repeats
        (
            "def f(q):\n    client.chat.completions.create(model='m', messages=[{'role': 'system', 'content': 'x'}, "
            "{'role': 'user', 'content': f'{time.time()} example'}, {'role': 'assistant', 'content': 'ok'}, q])\n",
            [("clock", 6, "messages[1] (user message, before the current turn)")],
        ),
        # a list built in two branches keeps its entries; so does one that grows in a branch
        (
            "def f(q, formal):\n    if formal:\n        msgs = [{'role': 'system', 'content': f'{datetime.now()}'}, q]\n"
            "    else:\n        msgs = [{'role': 'system', 'content': 'hi'}, q]\n    client.chat.completions.create(model='m', messages=msgs)\n",
            [("clock", 7, "messages[0] (system message)")],
        ),
        (
            "def f(q, extra):\n    msgs = [{'role': 'system', 'content': str(time.time())}]\n    if extra:\n"
            "        msgs.append({'role': 'user', 'content': 'example'})\n    msgs.append(q)\n"
            "    client.chat.completions.create(model='m', messages=msgs)\n",
            [("clock", 6, "messages[0] (system message)")],
        ),
        # a list passed through a helper whole keeps its entries and its spread
        (
            "def same(msgs):\n    return msgs\ndef f(q):\n    client.chat.completions.create(model='m', "
            "messages=same([{'role': 'system', 'content': str(time.time())}, q]))\n",
            [("clock", 8, "messages[0] (system message)")],
        ),
        (
            "def build(history, q):\n    return [{'role': 'system', 'content': 'x'}, *history, {'role': 'user', 'content': f'{time.time()} {q}'},"
            " {'role': 'assistant', 'content': 'Sure:'}]\ndef f(history, q):\n"
            "    client.chat.completions.create(model='m', messages=build(history, q))\n",
            [],
        ),
        # a Responses input list passed into the helper that sends it
        (
            "def send(items):\n    client.responses.create(model='m', input=items)\ndef f(q):\n"
            "    send([{'role': 'system', 'content': str(time.time())}, q])\n",
            [("clock", 8, "input[0] (system message)")],
        ),
        # without a spread, only the last entry is the turn
        ("def f(q):\n    client.chat.completions.create(model='m', messages=[{'role': 'system', 'content': 'x'}, {'role': 'user', 'content': f'{time.time()} {q}'}])\n", []),
        # a set's elements formatted by a helper, then sorted: the order is fixed
        ("def item(x):\n    return f'- {x}'\ndef f(tags, q):\n    lines = [item(t) for t in set(tags)]\n"
         "    client.responses.create(model='m', instructions='\\n'.join(sorted(lines)), input=q)\n", []),
        # a default of __init__ stored on self and read in a method
        (
            "class A:\n    def __init__(self, started=time.time()):\n        self.started = started\n"
            "    def ask(self, q):\n        client.responses.create(model='m', instructions=f'{self.started}', input=q)\n",
            [("clock", 6, "instructions")],
        ),
    ],
)  # fmt: skip
def test_where_a_value_lands(tmp_path: Path, body: str, expected: list[tuple[str, int, str]]) -> None:
    assert found(tmp_path, HEAD + body) == expected


def test_a_contributor_reading_the_view_through_a_helper(tmp_path: Path) -> None:
    source = """\
        from promptkit import PromptRegistry
        registry = PromptRegistry()
        def last_text(view):
            return view.messages[-1].content
        registry.register("echo", "knowledge", lambda view: "Topic: " + last_text(view))
        registry.register("session", "identity", lambda view: f"Session {view.session_id} on {view.platform}")
    """
    assert found(tmp_path, source) == [
        ("per-turn", 4, "contributor `echo` at anchor knowledge (before the history)")
    ]
