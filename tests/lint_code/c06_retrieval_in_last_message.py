# Retrieved passages go into the last user message, not the system prompt (Responses API).
# expect: none
from openai import OpenAI

client = OpenAI()
INSTRUCTIONS = "Answer from the passages given with the question. Quote them."


def ask(retriever, history: list[dict], question: str) -> str:
    passages = retriever.invoke(question)
    context = "\n".join(p.page_content for p in passages)
    turn = {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"}
    response = client.responses.create(model="gpt-4.1", instructions=INSTRUCTIONS, input=[*history, turn])
    return response.output_text
