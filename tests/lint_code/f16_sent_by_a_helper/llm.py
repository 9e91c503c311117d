"""A thin wrapper every feature of the app uses to call the model."""

from openai import OpenAI

client = OpenAI()


def chat(system: str, question: str) -> str:
    out = client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )
    return out.choices[0].message.content or ""
