# A random persona variant is picked for every call (Responses API).
# expect: random-id @14 instructions
import random

from openai import OpenAI

VARIANTS = ["friendly", "concise", "playful"]
TEMPLATE = "You are a {style} assistant for a bakery. Answer questions about orders."

client = OpenAI()


def style() -> str:
    return random.choice(VARIANTS)  # @14


def ask(question: str) -> str:
    instructions = TEMPLATE.format(style=style())
    response = client.responses.create(model="gpt-4.1", instructions=instructions, input=question)
    return response.output_text
