# Retrieved passages are put in the system prompt, before the history (Anthropic Messages).
# expect: per-turn @10 system
import anthropic

client = anthropic.Anthropic()
RULES = "Answer only from the context. Say 'I don't know' otherwise."


def respond(vector_store, history: list[dict], text: str) -> str:
    hits = vector_store.similarity_search(text, k=4)  # @10
    context = "\n\n".join(hit.page_content for hit in hits)
    system = RULES + "\n\nContext:\n" + context
    answer = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=800,
        system=system,
        messages=history + [{"role": "user", "content": text}],
    )
    return answer.content[0].text
