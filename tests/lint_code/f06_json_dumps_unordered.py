# A JSON schema in the system prompt is dumped from a dict built from a set, without sort_keys (litellm).
# expect: json-order @13 messages[0] (system message)
import json

import litellm

FIELDS = {"name", "email", "company", "role"}


def extract(text: str) -> str:
    template = dict.fromkeys(FIELDS, "string or null")
    system = "Extract these fields and answer with JSON only:\n"
    system += json.dumps(template, indent=2)  # @13
    response = litellm.completion(
        model="gpt-4.1-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
    )
    return response.choices[0].message.content
