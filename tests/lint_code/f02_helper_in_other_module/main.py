# The system prompt comes from a helper in another module (Anthropic Messages).
# expect: clock prompts.py@9 system
import anthropic

from prompts import build_system

client = anthropic.Anthropic()


def release_notes(commits: list[str], product: str) -> str:
    system = build_system(product)
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=system,
        messages=[{"role": "user", "content": "\n".join(commits)}],
    )
    return message.content[0].text
