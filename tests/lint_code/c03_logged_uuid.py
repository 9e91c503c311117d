# A request id is made per call but only logged and sent as a header, never in the prompt.
# expect: none
import logging
import uuid

from openai import OpenAI

log = logging.getLogger(__name__)
client = OpenAI()
SYSTEM = "You translate English to French."


def translate(text: str) -> str:
    request_id = str(uuid.uuid4())
    log.info("translate request %s: %s", request_id, f"{len(text)} chars")
    out = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
        extra_headers={"X-Request-Id": request_id},
        user=request_id,
    )
    log.debug("done %s", request_id)
    return out.choices[0].message.content or ""
