# An agent makes a session id in __init__ and reads it in a method (Responses API).
# expect: random-id @13 instructions
import uuid

from openai import OpenAI

BASE = "You are a research agent. Cite your sources."


class ResearchAgent:
    def __init__(self, client: OpenAI) -> None:
        self.client = client
        self.run_id = uuid.uuid4().hex  # @13
        self.instructions = BASE + f"\nRun: {self.run_id}"

    def ask(self, question: str) -> str:
        response = self.client.responses.create(
            model="gpt-4.1", instructions=self.instructions, input=question
        )
        return response.output_text
