# The JSON schema comes from a set but is dumped with sort_keys=True.
# expect: none
import json

import litellm

FIELDS = {"title", "author", "year"}


def parse_citation(text: str) -> str:
    schema = {field: "string" for field in FIELDS}
    system = "Answer with JSON of this shape:\n" + json.dumps(schema, sort_keys=True, indent=2)
    response = litellm.completion(
        model="gpt-4.1-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
    )
    return response.choices[0].message.content
