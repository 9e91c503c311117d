# A support bot puts today's date in its system prompt through two variables (Chat Completions).
# expect: clock @9 messages[0] (system message)
from datetime import datetime

from openai import OpenAI

client = OpenAI()

today = datetime.now().strftime("%A %d %B %Y")  # @9
SYSTEM = f"You are the support assistant of Acme. Today is {today}."


def answer(history: list[dict], text: str) -> str:
    system_prompt = SYSTEM
    response = client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": system_prompt}, *history, {"role": "user", "content": text}],
    )
    return response.choices[0].message.content or ""
