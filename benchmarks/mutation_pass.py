"""A hand-written mutation pass over the bad-input and proxy-safety code (issue 25): each mutation undoes
one defence; the tests named beside it must fail. Prints each mutation's outcome and the score.

Run from the repository root (it edits the files in place, one at a time, and restores each)::

    PYTHONPATH=$PWD python benchmarks/mutation_pass.py [-k NAME-PART]   # e.g. -k scale-out

A mutation "survives" when its tests still pass; the score is killed / total.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (name, file, original text, mutated text, tests)
MUTATIONS: list[tuple[str, str, str, str, str]] = [
    ("header secret words removed", "promptkit/formats/wire/redact.py",
     "return low in SENSITIVE_HEADERS or any(word in low for word in _SECRET_WORDS)",
     "return low in SENSITIVE_HEADERS",
     "tests/proxy/test_faults.py::test_every_header_that_can_carry_a_credential_is_left_out_of_the_record"),
    ("GETs to API paths recorded", "promptkit/proxy/server.py",
     'api = api_from_url(request.path) if request.method == "POST" else None',
     "api = api_from_url(request.path)",
     "tests/proxy/test_faults.py::test_a_get_to_an_api_path_is_forwarded_and_not_recorded"),
    ("torn last line not detected on open", "promptkit/capture.py",
     '                if size and os.pread(fd, 1, size - 1) != b"\\n":', "                if False:",
     "tests/proxy/test_faults.py::test_a_restarted_proxy_starts_on_a_fresh_line_after_a_torn_one"),
    ("live state: no release of held requests", "promptkit/proxy/live.py",
     "        while len(self._held) > self.max_held:", "        while False:",
     "tests/proxy/test_faults.py::test_live_figures_hold_a_bounded_number_of_requests"),
    ("redaction without a depth limit", "promptkit/formats/wire/redact.py",
     "            if depth >= max_depth:", "            if False:",
     "tests/proxy/test_faults.py::test_a_deeply_nested_body_is_forwarded_and_recorded_or_counted"),
    ("recording fault reaches the user's call", "promptkit/capture.py",
     "            self._write(error)\n        except Exception as exc:",
     "            self._write(error)\n        except KeyError as exc:",
     "tests/test_capture.py::test_a_recording_fault_never_fails_the_users_call"),
    ("key shape gsk_ dropped", "promptkit/formats/wire/redact.py", '    r"\\bgsk_[A-Za-z0-9]{20,}",\n', "",
     "tests/formats/test_wire.py"),
    ("AWS key ids dropped", "promptkit/formats/wire/redact.py",
     '    r"\\b(?:AKIA|ASIA)[0-9A-Z]{16}\\b",\n', "", "tests/formats/test_wire.py"),
    ("body secret fields kept", "promptkit/formats/wire/redact.py",
     "                    if isinstance(k, str) and is_secret_field(k) and isinstance(v, str | int | float):",
     "                    if False:", "tests/formats/test_wire.py"),
    ("query secrets: the old short list", "promptkit/formats/wire/redact.py",
     "    return low in _SECRET_QUERY or low.endswith(_SECRET_QUERY_SUFFIXES)",
     '    return low in {"key", "api_key", "apikey", "api-key", "token", "access_token"}',
     "tests/formats/test_wire.py"),
    ("URL password kept", "promptkit/formats/wire/redact.py", '        if ":" in userinfo:', "        if False:",
     "tests/formats/test_wire.py"),
    ("gzip body end not checked", "promptkit/formats/wire/bodies.py",
     '    if not d.eof:\n        raise HttpCaptureError(f"content-encoding: broken {coding} data (the stream is truncated)")',
     "", "tests/formats/test_wire.py"),
    ("zstd body not bounded", "promptkit/formats/wire/bodies.py", "                if size > limit:",
     "                if False:", "tests/formats/test_wire.py"),
    ("zstd log end not checked (the old stream_reader)", "promptkit/formats/base.py",
     '            reader = _ZstdReader(path.open("rb"))',
     '            import zstandard\n\n            reader = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)',
     "tests/formats/test_bad_inputs.py::test_a_truncated_compressed_log_is_an_error_not_a_shorter_log"),
    ("line length not bounded", "promptkit/formats/base.py", "                    if len(raw) > limit:",
     "                    if False:",
     "tests/formats/test_bad_inputs.py::test_a_line_longer_than_the_limit_is_an_error_naming_it"),
    ("decompression not bounded", "promptkit/formats/base.py", "        if self._read > self._limit:",
     "        if False:", "tests/formats/test_bad_inputs.py::test_a_log_that_expands_past_the_limit_stops_with_an_error"),
    ("blank runs skipped without counting", "promptkit/formats/base.py",
     "                            lineno += _skip_newlines(f)", "                            _skip_newlines(f)",
     "tests/formats/test_bad_inputs.py::test_a_long_run_of_blank_lines_keeps_the_line_numbers"),
    ("directory walk: the old rglob", "promptkit/formats/discovery.py",
     "            for f in sorted(_walk(p, walk_errors)):",
     "            for f in sorted(x for x in p.rglob('*') if not x.is_dir()):",
     "tests/formats/test_bad_inputs.py::test_every_skipped_path_in_a_folder_is_a_counted_problem"),
    ("usage not checked", "promptkit/providers/usage.py",
     "    prompt, cached, write = usage.prompt_tokens, usage.cached_tokens or 0, usage.cache_write_tokens or 0",
     "    return usage",
     "tests/formats/test_bad_inputs.py::test_impossible_usage_is_a_problem_naming_file_line_and_field"),
    ("corrupt first line stops the Claude Code sniff", "promptkit/formats/claude_code.py",
     "            continue  # a corrupt line", "            break  # a corrupt line",
     "tests/formats/test_bad_inputs.py::test_a_claude_code_transcript_with_a_corrupt_first_line_is_still_claude_code"),
    ("truncated HAR not sniffed", "promptkit/formats/http_capture.py",
     "        except json.JSONDecodeError:\n            return True\n        return False",
     "        except json.JSONDecodeError:\n            return False\n        return False",
     "tests/formats/test_bad_inputs.py::test_a_truncated_har_is_named_as_such"),
    ('surrogate note without its place', 'promptkit/analysis/prepare.py', '            self.mended.append((pos, surrogate_where(record)))', '            self.mended.append((pos, request_id(record)))', 'tests/formats/test_bad_inputs.py::test_a_lone_surrogate_is_named_by_file_line_and_field'),
    ("counter results not checked", "promptkit/assembly/token_counts.py", "        return _checked(count)",
     "        return count", "tests/assembly/test_token_counts.py"),
    ("swallowed cancellation not closed", "promptkit/assembly/registry.py",
     "            if cancelled is not None:\n                probe.swallowed = True",
     "            if False:\n                probe.swallowed = True",
     "tests/assembly/test_registry.py::test_an_async_contributor_that_swallows_its_cancellation_cannot_hold_the_turn"),
    ("CSV formulas written raw", "promptkit/report/files.py", "    safe.write_csv(path)", "    frame.write_csv(path)",
     "tests/test_cli.py::test_csv_cells_that_a_spreadsheet_would_run_are_neutralised"),
    ("proxy --timeout not validated", "promptkit/cli.py", "        type=_seconds,", "        type=float,",
     "tests/proxy/test_cli_proxy.py::test_proxy_timeout_must_be_a_positive_number_of_seconds"),
    ("ProxyConfig timeouts not validated", "promptkit/proxy/server.py",
     "    read_timeout: float = attrs.field(default=600.0, validator=_check_seconds)",
     "    read_timeout: float = 600.0", "tests/proxy/test_faults.py::test_timeouts_must_be_positive_and_finite"),
    # the third pass (issues 23 and 26): code that runs in pool workers, where mutmut's trampolines
    # do not follow (its mutants there come out "no tests")
    ("scale-out: the records' folder is left behind", "promptkit/analysis/plans/files.py",
     '    return tempfile.TemporaryDirectory(prefix="promptkit-pieces-", ignore_cleanup_errors=True)',
     '    return contextlib.nullcontext(tempfile.mkdtemp(prefix="promptkit-pieces-"))',
     "tests/analysis/test_parallel.py"),
    ("scale-out: a pool's workers send the records back as bytes", "promptkit/analysis/plans/files.py",
     "        if options.spill is not None:\n", "        if False:\n", "tests/analysis/test_parallel.py"),
    ("scale-out: the delta streams' arrays are not aligned", "promptkit/analysis/plans/transport.py",
     '            out.write(b"\\0" * (-out.tell() % 64))\n', "", "tests/analysis/test_parallel.py"),
    ("scale-out: a pool's frames come back as bytes", 'promptkit/analysis/plans/files.py', '    return options.spill if options.mapped else None', '    return None', 'tests/analysis/test_parallel.py'),
    ("scale-out: the step's shortcut keeps no cursor", "promptkit/analysis/simulator.py",
     "                cache._cursors[session] = cache._extend(",
     "                cache._extend(", "tests/analysis/test_simulator.py"),
    ("scale-out: the step's shortcut reads an expired path", "promptkit/analysis/simulator.py",
     "            if path is not None and (now is None or all(p.expires >= now for p in path)):",
     "            if path is not None:", "tests/analysis/test_simulator.py"),
    ('scale-out: a Dask worker sends its records to the client', 'promptkit/analysis/plans/files.py', 'spill is None and executor.holds_results:', 'spill is None and False:', 'tests/analysis/test_cluster.py'),
    ('scale-out: the coordinator loads a tokenizer', 'promptkit/analysis/plans/records.py', '    profile, model = profile_and_model(spec.provider, spec.cache_model)\n', '    profile, model = profile_and_model(spec.provider, spec.cache_model)\n    profile.load_tokenizer()\n', 'tests/analysis/test_parallel.py'),
    ("scale-out: the records plan leaves phase 1's composition out", "promptkit/analysis/plans/records.py",
     "[(0, p.deltas) for p in phases], [p.composition for p in phases]", "[(0, p.deltas) for p in phases], []",
     "tests/analysis/test_parallel.py"),
    ("scale-out: the records plan sends no source's record", "promptkit/analysis/plans/records.py",
     "read = {pos: records[pos] for pos in read_by(divergent)}",
     "read = {d.pos: records[d.pos] for d in divergent}", "tests/analysis/test_parallel.py"),
    ("scale-out: phase 1's composition positions not moved", 'promptkit/analysis/plans/files.py', 'composed.append(frame_in(group.composition, offset))', 'composed.append(frame_in(group.composition))', 'tests/analysis/test_parallel.py'),
    ("scale-out: the pieces travel uncompressed", "promptkit/analysis/plans/transport.py",
     '    frame.write_ipc_stream(buffer, compression="zstd")', "    frame.write_ipc_stream(buffer)",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a piece's offset not applied", "promptkit/analysis/plans/transport.py",
     "    if offset:  # in place", "    if False:  # in place",
     "tests/analysis/test_parallel.py"),
    ("scale-out: the fork server loads no tokenizer", "promptkit/analysis/_workerinit.py",
     'warm_worker(os.environ.get(TOKENIZERS_ENV, "").split(","))', "warm_worker()",
     "tests/analysis/test_parallel.py"),
    ("scale-out: the server's tokenizers left in the environment", "promptkit/analysis/executors.py",
     "            del os.environ[TOKENIZERS_ENV]", "            pass", "tests/analysis/test_parallel.py"),
    ("scale-out: the command line starts no fork server first", "promptkit/cli.py",
     "        start_fork_server(named_tokenizers(args.tokenizer, args.provider))", "        pass",
     "tests/analysis/test_parallel.py"),
    ("scale-out: the Dask workers not warmed", "promptkit/analysis/executors.py",
     '        client.run(warm_worker, tuple(tokenizers), on_error="ignore")', "        pass",
     "tests/analysis/test_cluster.py"),
    ("ruler: no anchor, every basis exact", "promptkit/analysis/ruler.py",
     '    return "local" if predicted_cached > 0 else "exact"', '    return "exact"', "tests/analysis/test_ruler.py"),
    ("ruler: a ruler that stays local not kept for the requests that read it", "promptkit/analysis/ruler.py",
     "    rulers[source_id] = ruler\n    return ruler", "    return ruler", "tests/analysis/test_ruler.py"),
    ("ruler: a reported prompt left unplaced", "promptkit/analysis/ruler.py",
     '        and not isinstance(getattr(usage, "prompt_tokens", None), int)\n', "",
     "tests/analysis/test_ruler.py"),
    ('ruler: the consecutive view drops the previous ruler before reading it', 'promptkit/analysis/replay.py', '        ruler = ruler_of(rulers, source_id, src_id, plan.prompt_len, shared, plan, usage)\n        if prev is not None and prev.source != source_id:  # memory: the consecutive view needs no older one\n            rulers.pop(prev.source, None)\n', '        if prev is not None and prev.source != source_id:  # memory: the consecutive view needs no older one\n            rulers.pop(prev.source, None)\n        ruler = ruler_of(rulers, source_id, src_id, plan.prompt_len, shared, plan, usage)\n', 'tests/analysis/test_ruler.py tests/formats/test_claude_code_tree.py'),
    ("scale-out: the cache read as its own shadow with its expiries", "promptkit/analysis/simulator.py",
     "self._shadow(self.cache, prompt, plan, None, known, resume)",
     "self._shadow(self.cache, prompt, plan, now, known, resume)", "tests/analysis/test_simulator.py"),
    ("scale-out: a capped cache read as its own shadow", "promptkit/analysis/simulator.py",
     "self._all_in_cache = _keeps_all(model) and model.capacity is None",
     "self._all_in_cache = _keeps_all(model)", "tests/analysis/test_simulator.py"),
    ("scale-out: int32 tails compared as bytes with the int64 buffer", "promptkit/tokens/tokenize.py",
     "    if a.shape[0] <= 4096 and a.dtype == b.dtype:", "    if a.shape[0] <= 4096:",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a stream's wide ids cut to int32", "promptkit/analysis/wire.py",
     "np.int32 if -(2**31) <= low and high < 2**31 else np.int64", "np.int32",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a request's message ends dropped in its stream", "promptkit/analysis/wire.py",
     "tuple(stream.ends[a:b].tolist()) if stream.has_ends[i] else None", "None",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a stream's positions not moved to the load order", "promptkit/analysis/wire.py",
     "self._at.update((pos + offset, (k, i))", "self._at.update((pos, (k, i))",
     "tests/analysis/test_parallel.py"),
    ("scale-out: an untokenized record's mending forgotten", 'promptkit/analysis/prepare.py', '        if tokenized.mended:\n            self.mended.append((pos, surrogate_where(record)))\n        tok = tokenized.value\n        if isinstance(tok, str):\n            self.problems.append((pos, LoadProblem(record.file, record.line, tok)))\n            return None\n', '        tok = tokenized.value\n        if isinstance(tok, str):\n            self.problems.append((pos, LoadProblem(record.file, record.line, tok)))\n            return None\n        if tokenized.mended:\n            self.mended.append((pos, surrogate_where(record)))\n', 'tests/formats/test_bad_inputs.py tests/analysis/test_parallel.py'),
    ("scale-out: the coordinator sniffs the files found in a directory", "promptkit/analysis/plans/files.py",
     "problems=[]) if named else forced", "problems=[])", "tests/analysis/test_parallel.py"),
    ("scale-out: a worker's file of no known format not reported", 'promptkit/analysis/plans/files.py', '            return FilePiece(0, tuple(sniffed), (), (), (), ())', '            return FilePiece(0, (), (), (), (), ())', 'tests/analysis/test_parallel.py tests/analysis/test_cluster.py'),
    ("scale-out: a continuation read past an expired path", "promptkit/analysis/simulator.py",
     "if continued is not None and all(self._alive(p, now) for p in continued):",
     "if continued is not None:", "tests/analysis/test_simulator.py"),
    ("scale-out: a continuation taken where the prompt shares less than the path", "promptkit/analysis/simulator.py",
     "resume[1] < node.depth or n < node.depth", "n < node.depth", "tests/analysis/test_simulator.py"),
    ("scale-out: a continuation taken over a marked entry", "promptkit/analysis/simulator.py",
     "            if node.mark_expires > -_INF:\n                return None",
     "            if False:\n                return None", "tests/analysis/test_simulator.py"),
    ("scale-out: a continuation said to diverge", "promptkit/analysis/simulator.py",
     "return CacheLookup(continued[0].depth, continued[0].source, False, ())",
     "return CacheLookup(continued[0].depth, continued[0].source, True, ())", "tests/analysis/test_simulator.py"),
    ("scale-out: a shared run copied", "promptkit/analysis/simulator.py",
     "            if self.share_tokens and not tokens.flags.writeable:\n                # the walk",
     "            if False:\n                # the walk", "tests/analysis/test_simulator.py"),
    ("scale-out: a ruler appends a point that is not past its last anchor", "promptkit/analysis/ruler.py",
     "x > a and y > b for (a, b)", "x > a and y >= b for (a, b)", "tests/analysis/test_ruler.py"),
    ("scale-out: a plan's TTLs lost on the way", "promptkit/tokens/cache_models.py",
     "                columns.entry_ttl.append(entry.ttl)", "                columns.entry_ttl.append(None)",
     "tests/tokens/test_cache_models.py tests/analysis/test_parallel.py"),
    ("scale-out: a plan's lookup points dropped on the way", "promptkit/tokens/cache_models.py",
     "            columns.has_lookup.append(plan.lookup_points is not None)",
     "            columns.has_lookup.append(False)", "tests/tokens/test_cache_models.py tests/analysis/test_parallel.py"),
    ("scale-out: a marked head lost on the way", "promptkit/analysis/wire.py",
     "[None if m < 0 else m for m in stream.marked.tolist()]", "[None for m in stream.marked.tolist()]",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a room that is not the chain's longest", "promptkit/analysis/wire.py",
     "                room[j] = max(room[j], room[i])", "                pass", "tests/analysis/test_parallel.py"),
    ("scale-out: the workers sniff with their own formats", "promptkit/analysis/plans/files.py",
     "problems=sniffed, formats=options.formats)", "problems=sniffed)", "tests/analysis/test_parallel.py"),
    ("scale-out: an unpicklable format sent anyway", "promptkit/analysis/plans/files.py",
     "    if not stuck:\n        return formats", "    if True:\n        return formats",
     "tests/analysis/test_parallel.py"),
    ("scale-out: the coordinator unpickles the records", "promptkit/analysis/plans/files.py",
     "    ruler_inputs = {pos + offset: got for",
     "    _ = [pickle.loads(blob) for _, blob in loaded]\n    ruler_inputs = {pos + offset: got for",
     "tests/analysis/test_parallel.py"),
    ("scale-out: a model switch's change class overwritten", "promptkit/analysis/plans/coordinator.py",
     "ATTRIBUTED if d.against >= 0 else ATTRIBUTED[:-2]", "ATTRIBUTED",
     "tests/analysis/test_parallel.py"),
    ("scale-out: problems named out of the analysis order", "promptkit/analysis/plans/coordinator.py",
     "        sorted(problems, key=lambda t: seq[t[0]]),", "        list(problems),",
     "tests/analysis/test_parallel.py"),
    ('scale-out: ruler mode skipped by the columns plan', 'promptkit/analysis/replay.py', '        if self.rulers is not None:\n            assert local is not None', '        if False:\n            assert local is not None', 'tests/analysis/test_parallel.py'),
    # (the coordinator's own 'divergence read without its source's messages' is gone: one attribute()
    # serves both plans, so the parallel tests cannot tell it; the golden frames do, below)
    ("scale-out: a usage's anchors not shipped", 'promptkit/analysis/wire.py', '        if not self.exact and (record.usage is not None or done.events is not None):', '        if False:', 'tests/analysis/test_parallel.py'),
    ("scale-out: a call's log events left out of ruler mode", "promptkit/analysis/replay.py",
     'fields["log_events"] = events', 'fields["log_events"] = None', "tests/formats/test_claude_code_tree.py tests/analysis/test_ruler.py"),
    ("scale-out: only the diverged request's file sent", 'promptkit/analysis/attribute.py', '{p for d in divergent for p in (d.pos, d.source, d.against) if p >= 0}', '{d.pos for d in divergent}', 'tests/analysis/test_parallel.py'),
    ("scale-out: usage checked against another session's", "promptkit/analysis/prepare.py",
     "previous, last_usage[record.session] = last_usage.get(record.session), usage",
     'previous, last_usage[""] = last_usage.get(""), usage', "tests/analysis/test_parallel.py"),
    ("ruler: the compaction's main thread not read", "promptkit/formats/claude_code.py",
     "    main = _compaction_prelude(events, main_thread) if main_thread is not None else None",
     "    main = None", "tests/formats/test_claude_code_tree.py"),
    ("ruler: a head read placed past the head", "promptkit/analysis/ruler.py",
     '        if basis != "exact" and placed > head:', "        if False:",
     "tests/formats/test_claude_code_tree.py"),
    # the analysis as stages (issue 39): the one replay step, the one attribute(), the one stage 1
    ("stages: a divergence classified against nothing", "promptkit/analysis/attribute.py",
     "    if d.against >= 0:\n        change = classify_change(", "    if False:\n        change = classify_change(",
     "tests/analysis/test_causes.py"),
    ("stages: the consecutive view's cached excerpt dropped", "promptkit/analysis/replay.py",
     "            cached = prev.tokens if prev is not None and source == prev.source else None",
     "            cached = None", "tests/analysis/test_engine.py"),
    ("stages: the simulated view's cached excerpt dropped", "promptkit/analysis/replay.py",
     "            cached = self.recent.get(source) if source is not None else None", "            cached = None",
     "tests/analysis/test_engine.py tests/analysis/test_parallel.py"),
    ("stages: a model switch's class overwritten in the local plan", "promptkit/analysis/plans/local.py",
     "self.attributed_at if d.against >= 0 else self.attributed_at[:-2]", "self.attributed_at",
     "tests/analysis/test_causes.py tests/analysis/test_engine.py tests/formats/test_claude_code_tree.py"),
    ("stages: the source's messages not read by attribute()", "promptkit/analysis/attribute.py",
     "    source = prepared[d.source].body[\"messages\"] if d.source >= 0 else None", "    source = None",
     "tests/analysis/test_engine.py tests/analysis/test_causes.py tests/test_golden_frames.py"),
    ("stages: read_file recognises no provider", "promptkit/formats/discovery.py",
     "            item = intern_messages(last.get(item.session), _infer(item))\n            last[item.session] = item\n            records.append(item)",
     "            item = intern_messages(last.get(item.session), item)\n            last[item.session] = item\n            records.append(item)",
     "tests/formats/test_discovery.py tests/test_golden_frames.py"),
    ("stages: read_file names no reordered session", "promptkit/formats/discovery.py",
     "            if moved:\n                reordered.append(session)\n            for k, r in zip(places",
     "            for k, r in zip(places", "tests/formats/test_discovery.py::test_read_file_reads_one_file_as_read_logs_does"),
    ("stages: explain_causes reads no minimum from a result", "promptkit/analysis/causes.py",
     "        model = getattr(requests, \"cache_model\", None) if model is None else model\n", "",
     "tests/analysis/test_causes.py"),
    ("stages: thinking renders not noted", "promptkit/analysis/prepare.py",
     "        if think is not None:\n            self.thinking.setdefault(think, pos)\n", "",
     "tests/analysis/test_engine.py tests/test_golden_frames.py"),
    ("stages: a pool declares it shares no files", "promptkit/analysis/executors.py",
     "    #: Its workers run on this machine (:attr:`Executor.shares_files`).\n    shares_files: Final = True",
     "    #: Its workers run on this machine (:attr:`Executor.shares_files`).\n    shares_files: Final = False",
     "tests/analysis/test_parallel.py"),
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "-k",
        action="append",
        default=[],
        help="only the mutations whose name contains this text (repeatable)",
    )
    parts = parser.parse_args(argv).k or [""]
    chosen = [m for m in MUTATIONS if any(part in m[0] for part in parts)]
    killed = 0
    for name, file, old, new, tests in chosen:
        path = ROOT / file
        original = path.read_text(encoding="utf-8")
        if original.count(old) != 1:
            print(f"STALE     {name}: the text to mutate is not found once in {file}")
            continue
        path.write_text(original.replace(old, new), encoding="utf-8")
        # a mutant whose tests hang does not pass them: killed (a process pool can hang at shutdown
        # after a call that cannot be pickled, CPython 3.11)
        hung = False
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", tests],
                cwd=ROOT, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            hung = True
        finally:
            path.write_text(original, encoding="utf-8")
        dead = hung or run.returncode != 0
        killed += dead
        print(
            f"{'killed' if dead else 'SURVIVED':9} {name}{' (its tests hung: stopped after 300 s)' if hung else ''}"
        )
    print(f"score: {killed}/{len(chosen)} mutations killed")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
