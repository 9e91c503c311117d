# promptkit's assembler: a clock and the speaker in contributors placed before the history.
# expect: clock @13 contributor `clock` at anchor context (before the history)
# expect: per-turn @17 contributor `speaker` at anchor identity (before the history)
from datetime import datetime

from promptkit import Anchor, PromptRegistry

registry = PromptRegistry()


@registry.contributor("clock", "context")
def clock(view):
    return f"Current time: {datetime.now():%H:%M}"  # @13


registry.register(
    "speaker", Anchor.IDENTITY, lambda view: f"You are talking to user {view.user_id}."  # @17
)
registry.register("rules", "knowledge", lambda view: "Keep answers short.")
registry.register("recent", "turn-context", lambda view: f"Time now: {datetime.now():%H:%M}")
