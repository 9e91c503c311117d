# The user's question is copied into the system prompt as "the topic" (Chat Completions).
# expect: per-turn @9 messages[0] (system message)
from openai import OpenAI

client = OpenAI()
PERSONA = "You are a patient maths tutor."


def tutor(history: list[dict], user_message: str) -> str:  # @9
    topic = user_message.split("?")[0]
    system = "{persona} The student is working on: {topic}".format(persona=PERSONA, topic=topic)
    messages = [{"role": "system", "content": system}]
    messages.extend(history)
    messages.append({"role": "user", "content": user_message})
    out = client.chat.completions.create(model="gpt-4.1", messages=messages)
    return out.choices[0].message.content or ""
