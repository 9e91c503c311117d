"""Prompt text for the release-notes bot."""

import time

RULES = "Write release notes in plain English. Keep each item to one line."


def build_system(product: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")  # @9
    return f"{RULES}\nProduct: {product}\nGenerated at {stamp}"
