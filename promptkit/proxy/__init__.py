"""The recording proxy (``promptkit proxy``): point any client at it, and every LLM call is forwarded
unchanged and recorded whole, with live cache figures per session.

- :mod:`promptkit.proxy.server`: :class:`ProxyConfig`, :func:`serve`, :func:`run_proxy` (needs the
  ``proxy`` extra: ``pip install 'promptkit[proxy]'``, which installs aiohttp);
- :mod:`promptkit.proxy.live`: the live figures (reported and predicted hit ratio, last breaks);
- how requests are grouped into sessions is :mod:`promptkit.formats.wire.sessions`, shared with the
  capture wrapper.

The names are imported lazily, so ``promptkit.proxy.live`` works without aiohttp.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LIVE_PATH", "ProxyConfig", "ProxyConfigError", "RunningProxy", "run_proxy", "serve"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'promptkit.proxy' has no attribute {name!r}")
    value = getattr(importlib.import_module("promptkit.proxy.server"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
