"""Analysis time next to the naive time and the lower bound, and plot time next to analysis time, in one run.

On the corpus of ``benchmarks/corpus.py`` (generated into a temporary directory unless ``--corpus`` is
given) it measures, side by side:

- **load**: :func:`promptkit.formats.read_logs` (JSON parsing; the same for every approach);
- **analysis**: :func:`promptkit.analysis.analyze_requests` on the loaded records (what
  ``promptkit analyze --no-plots`` runs after loading);
- **naive**: render and tokenize every request (and its answer) in full, with no reuse
  (``RequestTokenizer.tokenize_naive``);
- **lower bound**: tokenize each session's final request once (render it and encode each text
  segment between special tokens once, with a fresh ``RequestTokenizer``);
- **plots**: :func:`promptkit.report.plots.save_plots` on the analysis result (PNG files);

and prints analysis / lower bound, naive / analysis and plots / analysis. Analysis, plots (of that
analysis' result) and lower bound run ``--repeat`` times, taking turns; each is reported by its fastest
run (the run least disturbed by the rest of the machine, as ``timeit`` advises) and the ratios are of
those. The plots' first call, which also imports Pillow and loads the font, is printed apart and left
out of their fastest run (unless it is the only one). It also checks that the analysis' token counts
equal the naive ones for every request. Analysis, naive pass and lower bound all
run with the cyclic garbage collector paused (``analyze_requests`` pauses it itself) after a full
collection, so that a collection of the loaded corpus lands in none of them.

    python benchmarks/analysis_speed.py [--provider openai --tokenizer cl100k_base] [--corpus DIR]
                                        [--sessions 20] [--calls 130] [--view consecutive]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_corpus

from promptkit.analysis.api import analyze_requests
from promptkit.analysis.runtime import gc_paused
from promptkit.formats import read_logs as load_requests
from promptkit.providers.registry import get_provider
from promptkit.report.plots import save_plots
from promptkit.tokens.tokenize import RequestTokenizer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--provider", default="deepseek")
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--render", default=None)
    parser.add_argument("--view", default="consecutive", choices=("consecutive", "simulated"))
    parser.add_argument("--corpus", type=Path, default=None, help="an existing corpus directory")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=130)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-naive", action="store_true", help="skip the (slow) naive pass")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the analysis and of the lower bound (the fastest counts)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(tmp) / "corpus"
            write_corpus(corpus, sessions=args.sessions, calls=args.calls, seed=args.seed)
        profile = get_provider(args.provider)
        default_tok, default_render = profile.tokenizer, profile.render
        tok_name = args.tokenizer or default_tok
        render_name = args.render or default_render
        RequestTokenizer(render_name, tok_name).tokenize({"messages": [{"role": "user", "content": "warm"}]})

        t0 = time.perf_counter()
        loaded = load_requests([corpus])
        t_load = time.perf_counter() - t0
        records = list(loaded.records)

        analysis_times: list[float] = []
        lower_times: list[float] = []
        plot_times: list[float] = []
        plot_dir = tempfile.mkdtemp(dir=tmp)
        for _ in range(max(1, args.repeat)):
            gc.collect()
            t0 = time.perf_counter()
            result = analyze_requests(
                loaded, provider=args.provider, tokenizer=args.tokenizer, render=args.render, view=args.view
            )
            analysis_times.append(time.perf_counter() - t0)
            # the plots of this result right after it, so that plots and analysis meet the same moments
            # of a busy machine (the first call also imports Pillow and loads the font, once per process
            # as the tokenizer's data is loaded once before the analysis runs: shown apart)
            t0 = time.perf_counter()
            written = save_plots(result, plot_dir)
            plot_times.append(time.perf_counter() - t0)
            del result  # the next run starts from the same heap

            # every phase runs with the cyclic GC paused, as analyze_requests does: a full collection of
            # the loaded corpus (hundreds of ms) must not land in one phase's time and not in another's
            gc.collect()
            with gc_paused():
                t0 = time.perf_counter()
                finals: dict[str, object] = {}
                for r in records:
                    finals[r.session] = r
                final_tokens = 0
                for r in finals.values():  # a fresh tokenizer each: render once, encode every segment once
                    final_tokens += len(RequestTokenizer(render_name, tok_name).tokenize(r.request).tokens)  # type: ignore[attr-defined]
                lower_times.append(time.perf_counter() - t0)
        t_analysis, t_lower = min(analysis_times), min(lower_times)
        result = analyze_requests(
            loaded, provider=args.provider, tokenizer=args.tokenizer, render=args.render, view=args.view
        )

        t_naive = float("nan")
        if not args.no_naive:
            naive_rt = RequestTokenizer(render_name, tok_name)
            counts = []
            gc.collect()
            with gc_paused():
                t0 = time.perf_counter()
                for r in records:
                    counts.append(naive_rt.tokenize_naive(r.request, completion=r.completion).prompt_len)
                t_naive = time.perf_counter() - t0
            if counts != result.requests["prompt_tokens"].to_list():
                sys.exit("analysis and naive tokenization disagree on prompt_tokens")

        t_plots_first, t_plots = plot_times[0], min(plot_times[1:] or plot_times)

    total_tokens = int(result.requests["prompt_tokens"].sum())
    sessions = result.requests["session"].n_unique()
    print(
        f"corpus: {result.requests.height} requests in {sessions} sessions, {total_tokens / 1e6:.1f}M request "
        f"tokens, final requests {final_tokens / 1e3:.0f}k tokens; {render_name} + {tok_name}, "
        f"{args.view} view" + ("" if args.no_naive else "; analysis == naive token counts")
    )
    print(f"{'phase':<36} {'seconds':>8}")
    print(f"{'load (JSON parsing)':<36} {t_load:>8.2f}")
    runs = f" (fastest of {len(analysis_times)})" if len(analysis_times) > 1 else ""
    print(f"{'analysis (analyze_requests)':<36} {t_analysis:>8.2f}{runs}")
    print(f"{'naive (render + tokenize in full)':<36} {t_naive:>8.2f}")
    print(f"{'lower bound (final requests once)':<36} {t_lower:>8.2f}{runs}")
    print(
        f"{'plots (save_plots, ' + str(len(written)) + ' files)':<36} {t_plots:>8.2f}{runs}; first call {t_plots_first:.2f}"
    )
    print(
        f"analysis / lower bound = {t_analysis / t_lower:.2f}x (goal <= 2); "
        f"naive / analysis = {t_naive / t_analysis:.1f}x (goal >= 20); "
        f"plots / analysis = {t_plots / t_analysis:.1%} (goal < 10%)"
    )


if __name__ == "__main__":
    main()
