# A trace id is inserted at the front of the message list (Chat Completions).
# expect: random-id @11 messages[0] (system message)
from uuid import uuid4

from openai import OpenAI

client = OpenAI()


def complete(history: list[dict], text: str) -> str:
    trace = str(uuid4())  # @11
    messages = list(history)
    messages.append({"role": "user", "content": text})
    messages.insert(0, {"role": "system", "content": f"You are helpful. trace={trace}"})
    out = client.chat.completions.create(model="gpt-4.1", messages=messages)
    return out.choices[0].message.content or ""
