# The request is a dict passed with **; a secrets token reaches its system message (Chat Completions).
# expect: random-id @9 messages[0] (system message)
import secrets

from openai import OpenAI

client = OpenAI()
SYSTEM = "You label product photos. Nonce: %s"
NONCE = secrets.token_hex(8)  # @9


def label(description: str) -> str:
    request = {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": SYSTEM % NONCE},
            {"role": "user", "content": description},
        ],
    }
    out = client.chat.completions.create(**request)
    return out.choices[0].message.content or ""
