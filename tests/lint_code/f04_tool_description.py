# A tool description carries the date its index was "last refreshed" (Chat Completions).
# expect: clock @8 tools
from datetime import date

from openai import OpenAI

client = OpenAI()
refreshed = date.today().isoformat()  # @8

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": f"Search the product documentation (index refreshed {refreshed}).",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}


def run(messages: list[dict]) -> object:
    return client.chat.completions.create(model="gpt-4.1-mini", messages=messages, tools=[SEARCH_TOOL])
