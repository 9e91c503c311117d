"""Eliding old tool outputs: :class:`ElideToolOutputs` replaces all but the last tool outputs with one
line (:data:`ELIDED_OUTPUT`), as SWE-agent's ``last_n_observations`` history processor does.
"""

from __future__ import annotations

from typing import Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    RequestRecord,
)
from promptkit.whatif.transforms._bodies import (
    _role,
    text_of,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["ELIDED_OUTPUT", "ElideToolOutputs"]


#: SWE-agent's text for an elided observation (``last_n_observations`` history processor).
ELIDED_OUTPUT: Final[str] = "Old environment output: ({n} lines omitted)"


@attrs.frozen(slots=True)
class ElideToolOutputs(Transform):
    """Replace every tool output but the last ``keep`` with ``template`` (``{n}``: its line count), as
    SWE-agent does: fewer tokens per call, but the history changes at every step.

    Tool outputs are the messages of role ``role`` (``tool`` by default; ``user`` for agents whose
    observations are user messages, in which case the first user message, the task, is never elided).
    ``polling`` is SWE-agent's parameter of the same name (``LastNObservations`` in
    ``sweagent/agent/history_processors.py``): the elision window moves only once every ``polling``
    outputs, so the prompt's prefix changes once every ``polling`` steps and between ``keep`` and
    ``keep + polling - 1`` outputs are kept.

    >>> msgs = [{"role": "user", "content": "task"}] + [{"role": "tool", "content": f"l1\\nl2 {i}"} for i in range(3)]
    >>> [m["content"] for m in ElideToolOutputs(keep=1).apply(RequestRecord({"messages": msgs}, session="s")).request["messages"]]
    ['task', 'Old environment output: (2 lines omitted)', 'Old environment output: (2 lines omitted)', 'l1\\nl2 2']
    """

    keep: int = attrs.field(default=5)
    role: str = "tool"
    template: str = ELIDED_OUTPUT
    polling: int = attrs.field(default=1)

    @polling.validator
    def _check_polling(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"ElideToolOutputs.polling: expected an integer >= 1, got {value!r}")

    @keep.validator
    def _check_keep(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise UsageError(f"ElideToolOutputs.keep: expected an integer >= 0, got {value!r}")

    def describe(self) -> str:
        batch = f", updated every {self.polling} outputs" if self.polling > 1 else ""
        return f"elide all but the last {self.keep} {self.role} outputs{batch}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        messages = list(record.request.get("messages") or [])
        outputs = [i for i, m in enumerate(messages) if _role(m) == self.role]
        first = 1 if self.role == "user" else 0  # the task is never elided
        last = max(0, (len(outputs) // self.polling) * self.polling - self.keep)
        old = outputs[first:last]
        if not old:
            return record
        for i in old:
            text = text_of(messages[i].get("content"))
            n = text.count("\n") + 1 if text else 0
            messages[i] = {**messages[i], "content": self.template.format(n=n)}
        return attrs.evolve(record, request={**record.request, "messages": messages})
