# An agent keeps its own message list, starting empty: the task (with its time) goes in first and every
# step appends after it, so each request repeats the previous one and adds to its end.
# expect: none
from datetime import datetime

import anthropic

client = anthropic.Anthropic()


class Agent:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    def run(self, task: str, steps: int = 3) -> str:
        self.messages.append({"role": "user", "content": f"{datetime.now():%Y-%m-%d %H:%M} {task}"})
        text = ""
        for _ in range(steps):
            out = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=800, system="You are a planning agent.", messages=self.messages
            )
            text = out.content[0].text
            self.messages.append({"role": "assistant", "content": text})
            self.messages.append({"role": "user", "content": "Continue, or say DONE."})
        return text
