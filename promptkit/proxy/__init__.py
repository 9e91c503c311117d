"""The recording proxy (``promptkit proxy``): point any client at it, and every LLM call is forwarded
unchanged and recorded whole, with live cache figures per session.

- :mod:`promptkit.proxy.server`: :class:`ProxyConfig`, :func:`serve`, :func:`run_proxy`;
- :mod:`promptkit.proxy.sessions`: how requests are grouped into sessions;
- :mod:`promptkit.proxy.live`: the live figures (reported and predicted hit ratio, last breaks).

Needs the ``proxy`` extra (``pip install 'promptkit[proxy]'``, which installs aiohttp).
"""

from __future__ import annotations

from promptkit.proxy.server import LIVE_PATH, ProxyConfig, ProxyConfigError, RunningProxy, run_proxy, serve

__all__ = ["LIVE_PATH", "ProxyConfig", "ProxyConfigError", "RunningProxy", "run_proxy", "serve"]
