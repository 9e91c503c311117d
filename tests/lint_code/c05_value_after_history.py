# Changing values are placed after the history: an appended entry and promptkit's turn blocks.
# expect: none
import time
from datetime import datetime

import anthropic

from promptkit import PromptRegistry
from promptkit.assembly import turn_frame

client = anthropic.Anthropic()
registry = PromptRegistry()
registry.register("rules", "context", lambda view: "Answer in the user's language.")
registry.register("clock", "turn-hint", lambda view: f"Time: {datetime.now():%H:%M}")


@registry.contributor("memories", "turn-context")
def memories(view):
    return f"Last message: {view.messages[-1].content}"


def frame(history, current):
    return turn_frame(history, persona="You are Aalis.", volatile=f"Now {time.time():.0f}", current=current)


class Chat:
    def __init__(self) -> None:
        self.history: list[dict] = []

    def send(self, text: str) -> str:
        self.history.append({"role": "user", "content": f"{time.strftime('%H:%M')} {text}"})
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=400, system="You are Aalis.", messages=self.history
        )
        self.history.append({"role": "assistant", "content": reply.content[0].text})
        return reply.content[0].text
