"""Plans: ways to run the analysis' stages (:mod:`promptkit.analysis.prepare` →
:mod:`~promptkit.analysis.replay` → :mod:`~promptkit.analysis.attribute` →
:mod:`~promptkit.analysis.assemble`).

- :mod:`~promptkit.analysis.plans.local`: every stage in one loop, in this process (the reference);
- :mod:`~promptkit.analysis.plans.records`: records in this process, stages 1-3 on workers by chunk of
  whole sessions (the simulated view's replay in this process, :mod:`~promptkit.analysis.plans.coordinator`);
- :mod:`~promptkit.analysis.plans.files`: one task per log file, the workers read their own files;
- :mod:`~promptkit.analysis.plans.stream`: the consecutive view, session by session as logs are streamed;
- :mod:`~promptkit.analysis.plans.timeline`: either view streamed in time order, holding what the
  cache can still read (its first pass: :mod:`~promptkit.analysis.plans.timeline_index`), its frames
  written to disk as they are made (:mod:`~promptkit.analysis.plans.sink`);
- :mod:`~promptkit.analysis.plans.transport`: how the file plan's pieces travel (Arrow, mapped files).
"""
