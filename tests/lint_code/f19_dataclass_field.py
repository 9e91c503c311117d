# A dataclass field's factory makes a fresh id; a typed parameter carries it into the instructions (Responses).
# expect: random-id @13 instructions
import uuid
from dataclasses import dataclass, field

from openai import OpenAI


@dataclass
class Conversation:
    user: str
    history: list = field(default_factory=list)
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # @13


def respond(client: OpenAI, convo: Conversation, text: str) -> str:
    instructions = f"You help {convo.user}. Trace {convo.trace_id}."
    response = client.responses.create(model="gpt-4.1", instructions=instructions, input=[*convo.history, text])
    return response.output_text
