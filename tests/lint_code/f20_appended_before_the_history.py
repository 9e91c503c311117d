# The system message is appended first, then the history is spread after it: it is still the prefix.
# expect: clock @13 messages[0] (system message)
# expect: set-order @16 messages[0] (system message)
import time

import litellm

TOPICS = {"billing", "shipping", "returns"}


def build(history: list[dict], text: str) -> list[dict]:
    messages: list[dict] = []
    started = time.time()  # @13
    routing = dict.fromkeys(TOPICS, "agent")
    system = f"Started {started:.0f}. Route: " + "; ".join(
        f"{topic} -> {who}" for topic, who in routing.items()  # @16
    )
    messages.append({"role": "system", "content": system})
    messages.extend(history)
    messages.append({"role": "user", "content": text})
    return messages


def ask(history: list[dict], text: str) -> str:
    return litellm.completion(model="gpt-4.1-mini", messages=build(history, text)).choices[0].message.content
