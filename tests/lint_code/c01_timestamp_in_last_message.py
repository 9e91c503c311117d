# The time goes in the last user message only: the system prompt and the history stay the same.
# expect: none
from datetime import datetime

from openai import OpenAI

client = OpenAI()
SYSTEM = "You are a scheduling assistant. Use the time given in the user's message."


def schedule(history: list[dict], user_message: str) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M")
    current = {"role": "user", "content": f"[{now}] {user_message}"}
    out = client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "system", "content": SYSTEM}, *history, current]
    )
    return out.choices[0].message.content or ""
