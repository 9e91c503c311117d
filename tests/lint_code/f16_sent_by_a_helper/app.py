# The value is made here and sent by a wrapper in another module (llm.chat).
# expect: clock @9 messages[0] (system message)
from datetime import datetime, timezone

from llm import chat


def summarize(report: str) -> str:
    now = datetime.now(timezone.utc)  # @9
    system = f"You summarize incident reports. Report received {now.isoformat()}."
    return chat(system, report)
