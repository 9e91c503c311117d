# A tool loop appends the model's turn and the tool results after the user's message; each call resends
# them unchanged, so the user's timestamped message stays put.
# expect: none
import json
from datetime import datetime

from openai import OpenAI

client = OpenAI()
SYSTEM = {"role": "system", "content": "You are an assistant with a calculator."}
TOOLS = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]


def run(history: list[dict], text: str) -> str:
    messages = [SYSTEM, *history]
    messages.append({"role": "user", "content": f"[{datetime.now():%H:%M}] {text}"})
    while True:
        out = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
        reply = out.choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply)
        for call in reply.tool_calls:
            result = {"value": eval(call.function.arguments)}
            messages += [{"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
