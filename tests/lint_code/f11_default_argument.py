# A default argument reads the clock; the caller leaves it out (Anthropic Messages).
# expect: clock @8 system
from datetime import datetime

import anthropic


def system_prompt(team: str, now: datetime = datetime.now()) -> str:  # @8
    return f"You help the {team} team plan their week. It is {now:%A %H:%M}."


def plan(client: anthropic.Anthropic, team: str, request: str) -> str:
    reply = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1000,
        system=system_prompt(team),
        messages=[{"role": "user", "content": request}],
    )
    return reply.content[0].text
