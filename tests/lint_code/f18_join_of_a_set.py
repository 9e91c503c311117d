# The user's interests are deduplicated with set() and joined into the system prompt (litellm).
# expect: set-order @15 messages[0] (system message)
from litellm import acompletion

BASE = "You recommend books."


async def recommend(profile: dict, request: str) -> str:
    interests = set(profile["interests"])
    system = BASE
    if interests:
        system = (
            system
            + " The reader likes: "
            + ", ".join(interests)  # @15
        )
    response = await acompletion(
        model="claude-haiku-4-5",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": request}],
    )
    return response.choices[0].message.content
