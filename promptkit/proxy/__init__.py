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

from typing import Any

from promptkit.lazy import LazyExports

__all__ = ["LIVE_PATH", "ProxyConfig", "ProxyConfigError", "RunningProxy", "run_proxy", "serve"]
_EXPORTS = LazyExports(__name__, dict.fromkeys(__all__, "promptkit.proxy.server"))


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name, globals())


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())
