# The session's values are fixed strings; the per-call id is passed as metadata only.
# expect: none
import secrets

import anthropic

TOOLS = [{"name": "lookup_order", "description": "Find an order by its number.", "input_schema": {"type": "object"}}]


class Support:
    def __init__(self, client: anthropic.Anthropic, shop: str) -> None:
        self.client = client
        self.system = f"You are the support agent of {shop}."

    def reply(self, history: list[dict], text: str) -> str:
        nonce = secrets.token_urlsafe(8)
        out = self.client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=500,
            system=self.system,
            tools=TOOLS,
            messages=[*history, {"role": "user", "content": text}],
            metadata={"user_id": nonce},
        )
        return out.content[0].text
