"""What each ``promptkit`` command does, as one library function of explicit arguments: the command
line (:mod:`promptkit.cli`) parses the arguments, calls the function and prints what it returns.

- :mod:`~promptkit.commands.analyze`: ``promptkit analyze`` (:func:`~promptkit.commands.analyze.run_analyze`)
  and the analysis the other log commands share (:func:`~promptkit.commands.analyze.analyze_logs`);
- :mod:`~promptkit.commands.calibrate`, :mod:`~promptkit.commands.check`, :mod:`~promptkit.commands.lint`;
- :mod:`~promptkit.commands.catalog`: ``promptkit formats`` and ``promptkit providers``;
- :mod:`~promptkit.commands.fleet`: ``promptkit fleet``.

``promptkit whatif`` is :func:`promptkit.whatif.cli.run_whatif`; ``promptkit proxy`` is
:func:`promptkit.proxy.run_proxy`. The functions raise :class:`~promptkit.errors.PromptkitError`
subclasses; the command line turns them into one line and an exit code.
"""

from __future__ import annotations

__all__: list[str] = []
