# A helper builds the system prompt from constants and a sorted list; the clock is only logged.
# expect: none
import time

from openai import OpenAI

client = OpenAI()
RULES = ["Be brief.", "Use metric units.", "Never invent numbers."]


def system_prompt(extra: set[str]) -> str:
    started = time.time()
    text = "\n".join(RULES + sorted(extra))
    print(f"built the system prompt in {time.time() - started:.3f}s")
    return text


def ask(question: str) -> str:
    out = client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": system_prompt({"Cite sources."})}, {"role": "user", "content": question}],
    )
    return out.choices[0].message.content or ""
