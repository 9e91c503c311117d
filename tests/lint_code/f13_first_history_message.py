# The first user turn of the conversation carries a timestamp that is rebuilt every call (Anthropic).
# expect: clock @11 messages[0] (user message, before the current turn)
import time

import anthropic

client = anthropic.Anthropic()


def chat(history: list[dict], text: str) -> str:
    opening = {"role": "user", "content": "Session opened at %s. Be brief." % time.ctime()}  # @11
    ack = {"role": "assistant", "content": "Understood."}
    messages = [opening, ack, *history, {"role": "user", "content": text}]
    reply = client.messages.create(model="claude-haiku-4-5", max_tokens=300, messages=messages)
    return reply.content[0].text
