# The set of enabled skills is sorted before it is joined into the system prompt.
# expect: none
import anthropic

client = anthropic.Anthropic()


def answer(skills: list[str], messages: list[dict]) -> str:
    enabled = set(skills) | {"search"}
    system = "You can use these skills: " + ", ".join(sorted(enabled))
    ordered = sorted({s.lower() for s in skills})
    system += "\nAliases: " + " ".join(f"{s}" for s in ordered)
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=500, system=system, messages=messages)
    return reply.content[0].text
