# The tools sent are picked by iterating a set of enabled names (Anthropic Messages).
# expect: set-order @18 tools
import anthropic

TOOLS = {
    "weather": {"name": "weather", "description": "Current weather for a city.", "input_schema": {"type": "object"}},
    "calendar": {"name": "calendar", "description": "Read the user's calendar.", "input_schema": {"type": "object"}},
    "email": {"name": "email", "description": "Send an email.", "input_schema": {"type": "object"}},
}


def enabled_tools(settings: dict) -> set[str]:
    return {name for name in settings.get("tools", TOOLS) if name in TOOLS}


def reply(client: anthropic.Anthropic, settings: dict, messages: list[dict]) -> object:
    enabled = enabled_tools(settings)
    tools = [TOOLS[name] for name in enabled]  # @18
    return client.messages.create(model="claude-haiku-4-5", max_tokens=512, tools=tools, messages=messages)
