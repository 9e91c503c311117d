"""Where values that change between calls come from: the rules of ``promptkit lint-code``.

Each rule has a name (used by ``# promptkit: ignore[rule]`` and as the SARIF rule id), a description
and a fix. A call is a source by its qualified name, resolved through the module's imports
(``from datetime import datetime as dt`` makes ``dt.now()`` the clock ``datetime.datetime.now``).

>>> source_rule("datetime.datetime.now", 0)
'clock'
>>> source_rule("uuid.uuid5", 2) is None  # a name-based UUID is the same every call
True
>>> is_per_turn_parameter("user_message"), is_per_turn_parameter("system_prompt")
(True, False)
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = [
    "PER_TURN_VIEW_ATTRIBUTES",
    "RULES",
    "Rule",
    "is_per_turn_parameter",
    "is_retrieval",
    "source_rule",
]


@attrs.frozen
class Rule:
    """One kind of changing value: its id, what it is and how to fix it."""

    id: str
    name: str
    description: str
    fix: str


_AFTER = "move it after the history (into the last user message, or a turn-context / turn-hint contributor)"
RULES: Final[dict[str, Rule]] = {
    rule.id: rule
    for rule in (
        Rule("clock", "clock reading", "a clock reading (the current date or time) changes every call",
             f"{_AFTER}, or pin it per session (read the clock once when the session starts)"),
        Rule("random-id", "random value or id", "a random value or a fresh id (uuid, secrets, random, "
             "os.urandom) differs every call", f"{_AFTER}, or pin it per session (make the id once)"),
        Rule("process", "process fact", "a process fact (pid, hostname, thread id) differs between workers "
             "and restarts", f"{_AFTER}, or leave it out of the prompt"),
        Rule("set-order", "set iteration order", "a set's iteration order (and a dict or view built from a "
             "set) differs between processes (string hashing is randomized)",
             "sort it: sorted(...) before it is joined or listed"),
        Rule("json-order", "json.dumps of an unordered dict", "json.dumps of a dict whose key order is not "
             "fixed writes the keys in a different order between processes",
             "pass sort_keys=True to json.dumps (or build the dict in a fixed order)"),
        Rule("per-turn", "per-turn input", "the current turn's input (the user's message, a retrieval "
             "result) differs every turn", _AFTER),
    )
}  # fmt: skip

_CLOCKS = frozenset({
    "datetime.datetime.now", "datetime.datetime.today", "datetime.datetime.utcnow", "datetime.date.today",
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "arrow.now", "arrow.utcnow", "pendulum.now", "pendulum.today",
    "pandas.Timestamp.now", "pandas.Timestamp.today", "numpy.datetime64",
})  # fmt: skip
#: clocks when called with no argument (with one they format or convert the time they are given)
_CLOCKS_WITHOUT_ARGUMENT = frozenset({"time.localtime", "time.gmtime", "time.ctime", "time.asctime"})
_RANDOM_FUNCTIONS = frozenset({
    "random", "randint", "randrange", "choice", "choices", "sample", "shuffle", "uniform", "getrandbits",
    "gauss", "randbytes", "triangular", "normalvariate", "betavariate", "expovariate",
})  # fmt: skip
_IDS = frozenset({"uuid.uuid1", "uuid.uuid4", "uuid.uuid6", "uuid.uuid7", "os.urandom", "os.getrandom"})
_PROCESS = frozenset({
    "os.getpid", "os.getppid", "os.uname", "socket.gethostname", "socket.getfqdn", "platform.node",
    "platform.uname", "threading.get_ident", "threading.get_native_id",
})  # fmt: skip


def source_rule(qualified: str, n_args: int) -> str | None:
    """The rule of a call to ``qualified`` with ``n_args`` positional arguments, or ``None``.

    ``time.strftime(fmt)`` reads the clock; ``time.strftime(fmt, t)`` formats ``t``.
    """
    if qualified in _CLOCKS:
        return "clock"
    if qualified in _CLOCKS_WITHOUT_ARGUMENT and n_args == 0:
        return "clock"
    if qualified == "time.strftime" and n_args <= 1:
        return "clock"
    if qualified in _IDS or qualified.startswith("secrets."):
        return "random-id"
    module, _, name = qualified.rpartition(".")
    if module in ("random", "numpy.random") and name in _RANDOM_FUNCTIONS:
        return "random-id"
    if qualified in _PROCESS:
        return "process"
    return None


_PER_TURN_PARAMETERS = frozenset({
    "message", "msg", "query", "question", "utterance", "current_message", "latest_message", "new_message",
    "last_message", "incoming", "input_text", "request_text", "user_turn", "turn_input",
})  # fmt: skip


def is_per_turn_parameter(name: str) -> bool:
    """Whether a parameter of this name is the current turn's input (the user's message)."""
    if name in _PER_TURN_PARAMETERS:
        return True
    return name.startswith("user_") and name.endswith(("message", "msg", "input", "query", "text", "prompt"))


_RETRIEVAL_PREFIXES = ("retrieve", "similarity_search", "max_marginal_relevance_search", "search_docs",
                       "search_documents", "get_relevant_documents", "aget_relevant_documents", "asimilarity")  # fmt: skip
_RETRIEVAL_METHODS = frozenset({"search", "query", "invoke", "ainvoke", "recall", "lookup", "retrieve"})
_RETRIEVAL_RECEIVERS = ("retriev", "vector", "index", "store", "collection", "memory", "memories", "rag",
                        "knowledge", "kb", "search", "db")  # fmt: skip


def is_retrieval(name: str, receiver: str | None) -> bool:
    """Whether a call to ``name`` (a method of ``receiver``, a variable's name, when given) fetches
    something for the current turn (a retrieval, a search, a memory recall)."""
    if name.startswith(_RETRIEVAL_PREFIXES):
        return True
    if receiver is None or name not in _RETRIEVAL_METHODS:
        return False
    low = receiver.lower()
    return low != "re" and any(word in low for word in _RETRIEVAL_RECEIVERS)


#: Attributes of promptkit's ``PromptView`` that change between turns (the turn's messages, its speaker,
#: its trigger); ``session_id`` and ``platform`` stay the same for a session.
PER_TURN_VIEW_ATTRIBUTES: Final[frozenset[str]] = frozenset(
    {"messages", "user_id", "trigger_type", "dry_run"}
)
