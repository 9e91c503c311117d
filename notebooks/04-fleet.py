# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · A fleet of replicas: how much KV cache, and which router
#
# Serving a model yourself, each replica keeps its own prefix cache. This notebook asks two questions of a
# workload, offline:
#
# 1. how much cache buys what hit ratio (the LRU capacity curve, in one pass), and what that costs in
#    bytes for a given model;
# 2. what the routing policy does to the fleet's hit ratio at 4, 16 and 40 replicas.
#
# The workload is synthetic and small, so the notebook runs in seconds: a team's retrieval assistant where
# 60 conversations of 4 turns each read one of three long documents (12k tokens each). The same functions
# take a Mooncake trace or any log promptkit reads (`load_fleet_input`); docs/how-to/fleet.md has the
# figures of Mooncake's published trace.

# %%
# %matplotlib inline
import random

import matplotlib
import polars as pl
from IPython.display import display

from promptkit.analysis.capacity import capacity_curve
from promptkit.analysis.fleet import RouterSettings, compare_fleet
from promptkit.analysis.fleet_latency import LatencyModel
from promptkit.analysis.kv_bytes import known_model, kv_bytes_table
from promptkit.analysis.trace import TraceRecord
from promptkit.report.fleet import fleet_pivot, fleet_table, fleet_verdict, plot_fleet

matplotlib.rcParams["figure.dpi"] = 80
table_config = pl.Config(tbl_rows=40, tbl_cols=16, tbl_width_chars=200, fmt_str_lengths=60)
BLOCK = 512

# %% [markdown]
# ## 1. The workload, as block-hash chains
#
# A request is a chain of 512-token blocks; a block id stands for its tokens and everything before them
# (as in Mooncake's traces and `trace_from_requests`). Each conversation starts with its document (24
# blocks), a system prompt shared by all (2 blocks) in front; each turn adds two blocks of its own.
# Conversations interleave, one request every 2 seconds.

# %%
rng = random.Random(4)
SYSTEM = (0, 1)
DOCS = {d: tuple(range(100 * (d + 1), 100 * (d + 1) + 24)) for d in range(3)}
chains: dict[int, tuple[int, ...]] = {}
trace: list[TraceRecord] = []
next_id = 10_000
for step in range(240):
    conv = rng.randrange(60)
    if conv not in chains:
        chains[conv] = SYSTEM + DOCS[conv % 3]
    chains[conv] = chains[conv] + (next_id, next_id + 1)
    next_id += 2
    trace.append(TraceRecord(2000.0 * step, len(chains[conv]) * BLOCK - 100, 200, chains[conv]))
print(
    f"{len(trace)} requests, {sum(len(r.hash_ids) for r in trace):,} block reads, "
    f"{sum(r.input_length for r in trace):,} input tokens"
)

# %% [markdown]
# ## 2. Hit ratio against capacity, in one pass
#
# `capacity_curve` computes every block read's LRU stack distance once; the hit ratio at any capacity
# follows. Bytes come from the model's config (`kv_bytes`): here Llama 3.1 8B (128 KiB per token) and
# DeepSeek V3 (MLA, 68.6 KiB per token).

# %%
capacities = [BLOCK * b for b in (16, 32, 64, 128, 256, 512, 1024)] + [None]
curve = capacity_curve(trace, capacities, bytes_per_token=known_model("llama-3.1-8b").bytes_per_token())
deepseek = known_model("deepseek-v3").bytes_per_token()
curve = curve.with_columns(
    (pl.col("capacity_bytes") / 2**30).round(2).alias("llama_gib"),
    (pl.col("capacity_tokens") * deepseek / 2**30).round(2).alias("deepseek_v3_gib"),
)
with table_config:
    display(curve.select("capacity_tokens", "llama_gib", "deepseek_v3_gib", "hit_ratio"))
with table_config:
    display(kv_bytes_table().select("model", "attention", "kib_per_token", "kib_per_token_at_context"))

# %% [markdown]
# ## 3. Replicas and routing
#
# `compare_fleet` replays the requests over R replicas, each with its own LRU cache, for every policy.
# Round robin spreads each conversation over the replicas; consistent hashing keys on the first 4 blocks
# (the system prompt and the document's start), prefix-aware routing (SGLang's policy) follows the
# replica that holds the longest prefix unless the load is imbalanced.

# %%
fleet = compare_fleet(
    trace,
    replicas=[4, 16, 40],
    policies=["round_robin", "least_loaded", "consistent_hash", "prefix_aware"],
    capacities=[BLOCK * 128, None],
)
with table_config:
    display(fleet_table(fleet.summary))

# %%
plot_fleet(fleet.summary)

# %% [markdown]
# ## 4. What the fleet loses to spreading
#
# With unbounded caches, a single cache is the ceiling; every replica that meets a document cold pays it
# again.

# %%
unbounded = fleet.summary.filter(pl.col("capacity_tokens").is_null())
single = capacity_curve(trace, [None])["hit_ratio"].item()
lost = unbounded.select(
    "policy",
    "replicas",
    "hit_ratio",
    (single - pl.col("hit_ratio")).alias("lost_to_routing"),
    "load_imbalance",
)
with table_config:
    display(lost)
print(f"one cache, unbounded: {single:.3f}")

# %% [markdown]
# Prefix-aware routing and consistent hashing keep the ceiling at every replica count, and pay for it in
# balance: with one request every 2 seconds, at most 5 are in flight (the simulation counts a request in
# flight for 10 s), far below SGLang's default `balance_abs_threshold` of 64, so the router never
# rebalances and a few replicas take the documents' conversations. A tighter threshold trades hits for
# balance:

# %%
tight = RouterSettings(balance_abs_threshold=1, balance_rel_threshold=1.0)
balanced = compare_fleet(
    trace, replicas=[4, 16, 40], policies=["prefix_aware"], capacities=[None], router=tight
)
with table_config:
    display(balanced.summary.select("policy", "replicas", "hit_ratio", "load_imbalance"))

# %% [markdown]
# ## 5. The verdict, and time to first token
#
# A latency model turns the hit ratio into what a user waits for: each replica prefills one request at a
# time, first come first served, for its uncached tokens (here 20,000 tokens/s a replica, decoding at 50
# tokens/s a request). `fleet_verdict` names, per capacity and replica count, the best policy, its share
# of the one-cache ceiling, its imbalance and the runner-up; the score-based routers (Dynamo's `kv_cost`,
# llm-d's `weighted_scorers`, production-stack's `load_aware`) run beside the others.

# %%
timed = compare_fleet(
    trace,
    replicas=[4, 16],
    policies=["round_robin", "consistent_hash", "prefix_aware", "kv_cost", "weighted_scorers", "load_aware"],
    capacities=[None],
    latency=LatencyModel(prefill_tokens_per_s=20_000, decode_tokens_per_s=50),
)
verdict = fleet_verdict(timed.summary)
with table_config:
    display(verdict.select("capacity", "replicas", "best", "share_of_ceiling", "load_imbalance", "runner_up"))
    display(fleet_pivot(timed.summary, "ttft_p50_s"))

# %% [markdown]
# At this light load (one request every 2 seconds, each prefilled in well under a second) the queue
# scorer of `weighted_scorers` rarely sees a queue, so it keeps nearly everything on the replicas that
# hold the documents: the best hit ratio at the worst imbalance. The TTFT pivot says what that costs, and
# the verdict shows both, so a reader can pick the runner-up when balance matters more.
