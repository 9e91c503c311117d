# The worker's host name and pid are put in the system prompt "for debugging" (Chat Completions).
# expect: process @10 messages[0] (system message)
# expect: process @11 messages[0] (system message)
import os
import socket

from openai import OpenAI

client = OpenAI()
HOST = socket.gethostname()  # @10
WORKER = f"{HOST}/{os.getpid()}"  # @11


def classify(ticket: str) -> str:
    system = "Classify the support ticket as billing, bug or other. Worker: " + WORKER
    result = client.chat.completions.create(
        model="gpt-4.1-nano",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": ticket}],
    )
    return result.choices[0].message.content or ""
