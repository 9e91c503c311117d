# A dataclass holds the session's stable settings; the per-call stamp goes in the current input only.
# expect: none
import time
from dataclasses import dataclass, field

from openai import OpenAI


@dataclass
class Settings:
    persona: str = "You are a careful code reviewer."
    rules: list = field(default_factory=lambda: ["Point at the line.", "Suggest a fix."])


def review(client: OpenAI, settings: Settings, diff: str) -> str:
    instructions = settings.persona + "\n" + "\n".join(settings.rules)
    response = client.responses.create(
        model="gpt-4.1", instructions=instructions, input=f"[{time.strftime('%H:%M')}]\n{diff}"
    )
    return response.output_text
