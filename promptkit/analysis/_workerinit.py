"""What a local pool's workers start with, done once in the fork server they are forked from.

:class:`~promptkit.analysis.executors.ProcessPool` names this module in its fork server's preload:
importing it runs :func:`~promptkit.analysis.executors.warm_worker` with the tokenizers named in
:data:`~promptkit.analysis.executors.TOKENIZERS_ENV` (tokenizer or provider names, comma-separated, set
by :func:`~promptkit.analysis.executors.start_fork_server` for the server it starts) and those of the
providers of the logs named in :data:`~promptkit.analysis.executors.LOGS_ENV`, so that every
worker is forked with the registries and the tokenizers loaded, and no worker repeats them: their
tables are shared between the workers until one writes to them.
"""

from __future__ import annotations

import os

from promptkit.analysis.executors import LOGS_ENV, TOKENIZERS_ENV, warm_worker

warm_worker(
    os.environ.get(TOKENIZERS_ENV, "").split(","),
    [p for p in os.environ.get(LOGS_ENV, "").split(os.pathsep) if p],
)
