"""Tests for promptkit/analysis/fleet.py: replicas, routing policies, the shared tier, inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis.fleet import (
    POLICIES,
    RouterSettings,
    compare_fleet,
    load_fleet_input,
    simulate_fleet,
)
from promptkit.analysis.trace import TraceRecord, read_trace, simulate_trace
from promptkit.errors import PromptkitError

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"
DEEPSEEK = ROOT / "fixtures" / "real-logs" / "deepseek"
BS = 512

# the shared-document case: a 24k-token document (48 blocks), 41 sessions of 3 turns, each turn one
# new block of its own after the previous turns; turns interleaved over sessions, one second apart
DOC, SESSIONS, TURNS = 48, 41, 3


def _shared_document() -> list[TraceRecord]:
    records = []
    for turn in range(TURNS):
        for s in range(SESSIONS):
            ids = tuple(range(DOC)) + tuple(10_000 + 100 * s + j for j in range(turn + 1))
            records.append(TraceRecord(1000.0 * len(records), len(ids) * BS, 10, ids))
    return records


def _replay_assigned(records: list[TraceRecord], replica_of: list[int]) -> int:
    """Cached tokens when request k runs on replica_of[k], each replica keeping every prefix it saw."""
    seen: dict[int, set[tuple[int, ...]]] = {}
    cached = 0
    for k, r in enumerate(records):
        prefixes = seen.setdefault(replica_of[k], set())
        hit = 0
        while hit < len(r.hash_ids) and r.hash_ids[: hit + 1] in prefixes:
            hit += 1
        cached += min(hit * BS, r.input_length)
        prefixes.update(r.hash_ids[: i + 1] for i in range(len(r.hash_ids)))
    return cached


def test_shared_document_round_robin_over_40_replicas() -> None:
    records = _shared_document()
    n = len(records)
    total = sum(r.input_length for r in records)
    # closed form: the first 40 requests each meet a cold replica; every later one reads the document
    # and nothing of its session (request t*41+s lands on (t+s) mod 40, never where its last turn ran)
    expected = (n - 40) * DOC * BS
    assert _replay_assigned(records, [k % 40 for k in range(n)]) == expected
    fleet = simulate_fleet(records, replicas=40, policy="round_robin", capacity=None)
    assert fleet.summary["cached_tokens"].item() == expected
    assert fleet.summary["hit_ratio"].item() == pytest.approx(expected / total)
    assert fleet.replicas.height == 40 and fleet.replicas["requests"].sum() == n


def test_shared_document_prefix_aware_over_40_replicas() -> None:
    records = _shared_document()
    total = sum(r.input_length for r in records)
    # closed form for one cache: the very first request is cold, every other first turn reads the
    # document, every later turn reads the document and its session's previous turns
    one_cache = (SESSIONS - 1) * DOC * BS + SESSIONS * sum((DOC + t) * BS for t in range(1, TURNS))
    assert _replay_assigned(records, [0] * len(records)) == one_cache
    # at most 10 requests in flight (1 s apart, 10 s each): SGLang's balance threshold (64) never
    # trips, and the document makes every match rate > 0.3, so all requests meet the first replica
    fleet = simulate_fleet(records, replicas=40, policy="prefix_aware", capacity=None)
    assert fleet.summary["cached_tokens"].item() == one_cache
    assert fleet.summary["hit_ratio"].item() == pytest.approx(one_cache / total)
    assert fleet.replicas.filter(fleet.replicas["requests"] > 0).height == 1
    # with the load balanced tightly (more than 2 in flight apart), the router spreads the requests:
    # every replica that takes one reads the document cold once
    spread = simulate_fleet(
        records, replicas=40, policy="prefix_aware", capacity=None,
        router=RouterSettings(balance_abs_threshold=2, balance_rel_threshold=1.0),
    )  # fmt: skip
    used = spread.replicas.filter(spread.replicas["requests"] > 0).height
    assert used > 1
    # each replica past the first reads the 48-block document cold once (and splits some histories)
    assert spread.summary["cached_tokens"].item() <= one_cache - (used - 1) * DOC * BS
    assert spread.summary["load_imbalance"].item() < fleet.summary["load_imbalance"].item()


def test_shared_tier_recovers_what_replicas_miss() -> None:
    records = _shared_document()
    one_cache = _replay_assigned(records, [0] * len(records))
    local = _replay_assigned(records, [k % 40 for k in range(len(records))])
    fleet = simulate_fleet(records, replicas=40, policy="round_robin", capacity=None, shared_tier=True)
    assert fleet.summary["cached_tokens"].item() == one_cache
    assert fleet.summary["shared_hit_ratio"].item() == pytest.approx(
        (one_cache - local) / fleet.summary["input_tokens"].item()
    )
    # a shared tier of 8 blocks keeps the first 8 blocks of the latest request (LRU: the deeper block is
    # the less recent): the 39 cold replicas after the first read those 8 document blocks from it
    small = simulate_fleet(records, replicas=40, policy="round_robin", capacity=None, shared_capacity=8 * BS)
    assert small.summary["cached_tokens"].item() == local + 39 * 8 * BS


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=30
    ),
    capacity=st.one_of(st.none(), st.integers(1, 30)),
    policy=st.sampled_from([p for p in POLICIES if p != "session"]),
)
def test_one_replica_is_the_single_cache_simulation(
    data: list[tuple[int, int, int]], capacity: int | None, policy: str
) -> None:
    # conversations: each request extends its conversation's last request by a few blocks
    last: dict[int, tuple[int, ...]] = {}
    records = []
    next_id = 0
    for conv, fresh, when in data:
        ids = last.get(conv, (999,)) + tuple(range(next_id, next_id + fresh))
        next_id += fresh
        last[conv] = ids
        records.append(TraceRecord(float(when), len(ids) * 4 - 1, 0, ids))
    fleet = simulate_fleet(
        records, replicas=1, policy=policy, capacity=None if capacity is None else capacity * 4, block_size=4
    )
    want = int(simulate_trace(records, block_size=4, capacity_blocks=capacity)["cached_tokens"].sum())
    assert fleet.summary["cached_tokens"].item() == want


def test_mooncake_slice_replayed_against_an_independent_count() -> None:
    head = read_trace(HEAD)
    replica_of = [0] * len(head)
    order = sorted(range(len(head)), key=lambda k: (head[k].timestamp, k))
    ordered = [head[k] for k in order]
    want = _replay_assigned(ordered, replica_of)
    assert want == (len(head) - 1) * BS  # the slice shares only its first block
    for policy in POLICIES:
        if policy == "session":
            continue
        one = simulate_fleet(head, replicas=1, policy=policy, capacity=None)
        assert one.summary["cached_tokens"].item() == want
    rr = simulate_fleet(head, replicas=4, policy="round_robin", capacity=None)
    assert rr.summary["cached_tokens"].item() == _replay_assigned(ordered, [k % 4 for k in range(len(head))])


def test_policies_route_as_documented() -> None:
    records = _shared_document()
    # consistent hashing of the leading blocks: the document is the key, so one replica takes all
    ring = simulate_fleet(records, replicas=8, policy="consistent_hash", capacity=None)
    assert ring.replicas.filter(ring.replicas["requests"] > 0).height == 1
    deeper = simulate_fleet(
        records,
        replicas=8,
        policy="consistent_hash",
        capacity=None,
        router=RouterSettings(hash_blocks=DOC + 1),
    )
    # keyed on each session's own first block: 41 keys reach all 8 replicas, a session's turns on one
    assert deeper.replicas.filter(deeper.replicas["requests"] > 0).height == 8
    assert all(n % TURNS == 0 for n in deeper.replicas["requests"].to_list())
    # session affinity: every turn of a session on one replica, so turns read their history
    sessions = [str(k % SESSIONS) for k in range(len(records))]
    by_session = simulate_fleet(records, replicas=8, policy="session", capacity=None, sessions=sessions)
    # least loaded: 10 in flight at most, spread evenly
    least = simulate_fleet(records, replicas=8, policy="least_loaded", capacity=None)
    counts = least.replicas["requests"].to_list()
    assert max(counts) - min(counts) <= 1
    rr = simulate_fleet(records, replicas=8, policy="round_robin", capacity=None)
    assert by_session.summary["cached_tokens"].item() > rr.summary["cached_tokens"].item()
    # random is seeded: the same seed routes the same way, another seed differently
    a = simulate_fleet(records, replicas=8, policy="random", capacity=None)
    b = simulate_fleet(records, replicas=8, policy="random", capacity=None)
    c = simulate_fleet(records, replicas=8, policy="random", capacity=None, router=RouterSettings(seed=7))
    assert a.replicas["requests"].to_list() == b.replicas["requests"].to_list()
    assert a.replicas["requests"].to_list() != c.replicas["requests"].to_list()


def test_compare_fleet_grid_and_bytes() -> None:
    head = read_trace(HEAD)
    frame = compare_fleet(
        head, replicas=[1, 2], policies=["round_robin", "least_loaded"], capacities=[2048, None],
        capacity_bytes=[70272 * 4096], models=["deepseek-v3"],
    ).summary  # fmt: skip
    assert frame.height == 3 * 2 * 2
    assert set(frame["capacity_tokens"].to_list()) == {2048, None, 4096}
    assert frame.filter(frame["capacity_tokens"] == 4096)["capacity_bytes"].unique().to_list() == [
        70272.0 * 4096
    ]
    assert (frame["bytes_per_token"] == 70272.0).all()


def test_logs_as_input_keep_sessions() -> None:
    data = load_fleet_input(DEEPSEEK)
    assert data.sessions is not None and len(set(data.sessions)) == 3
    assert len(data.trace) == 154
    one = simulate_fleet(data, replicas=1, policy="session", capacity=None)
    assert one.summary["cached_tokens"].item() == int(simulate_trace(list(data.trace))["cached_tokens"].sum())
    spread = simulate_fleet(data, replicas=3, policy="session", capacity=None)
    assert spread.summary["cached_tokens"].item() <= one.summary["cached_tokens"].item()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"replicas": 0}, "replicas must be .* got 0"),
        ({"replicas": -3}, "got -3"),
        ({"policy": "fastest"}, "'fastest'"),
        ({"capacity": 0}, "capacity .* got 0"),
        ({"capacity": -1024}, "got -1024"),
        ({"capacity": 100}, "capacity 100 tokens holds no block"),
        ({"shared_capacity": 0}, "shared capacity .* got 0"),
        ({"policy": "session"}, "session ids"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs: dict[str, object], named: str) -> None:
    args: dict[str, object] = {"replicas": 2, "policy": "round_robin", "capacity": None, **kwargs}
    with pytest.raises(PromptkitError, match=named):
        simulate_fleet(read_trace(HEAD), **args)  # type: ignore[arg-type]


def test_bad_model_or_bytes_is_one_clear_error(tmp_path: Path) -> None:
    head = read_trace(HEAD)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 32, "num_attention_heads": 0, "hidden_size": 4096}))
    with pytest.raises(PromptkitError, match="'num_attention_heads'"):
        compare_fleet(head, replicas=[1], policies=["round_robin"], models=[str(config)])
    with pytest.raises(PromptkitError, match="need a model"):
        compare_fleet(head, replicas=[1], policies=["round_robin"], capacity_bytes=[1e9])
    with pytest.raises(PromptkitError, match="'nope'"):
        compare_fleet(head, replicas=[1, 2], policies=["round_robin", "nope"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hash_blocks", 0),
        ("virtual_nodes", -1),
        ("cache_threshold", -0.1),
        ("inflight_seconds", "10"),
        ("seed", 1.5),
    ],
)
def test_bad_router_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(PromptkitError, match=f"RouterSettings.{field} .* got {value!r}"):
        RouterSettings(**{field: value})  # type: ignore[arg-type]


def test_least_loaded_counts_requests_in_flight_not_tokens() -> None:
    big = TraceRecord(0.0, 20 * BS, 1, tuple(range(20)))
    later = TraceRecord(100_000.0, BS, 1, (100,))  # 100 s on: the big request is no longer in flight
    next_ = TraceRecord(100_500.0, BS, 1, (200,))  # half a second later: `later` still is
    fleet = simulate_fleet([big, later, next_], replicas=2, policy="least_loaded", capacity=None)
    # `later` meets two idle replicas and goes to the one with fewer tokens so far (replica 1); `next_`
    # goes to the replica with nothing in flight (replica 0), though it has served more tokens
    assert fleet.replicas["requests"].to_list() == [2, 1]


@pytest.mark.parametrize("hash_blocks", [1, 3])
def test_consistent_hashing_keys_on_exactly_the_hash_blocks_th_block(hash_blocks: int) -> None:
    # the key is the id of block number ``hash_blocks`` (it covers its prefix): requests equal up to it
    # and different after go to one replica; requests that differ in it spread over the ring
    def records(differ_at: int) -> list[TraceRecord]:
        out = []
        for r in range(40):
            ids = tuple(range(differ_at)) + tuple(10_000 * (r + 1) + j for j in range(6 - differ_at))
            out.append(TraceRecord(1000.0 * r, len(ids) * BS, 10, ids))
        return out

    settings_ = RouterSettings(hash_blocks=hash_blocks)

    def used(differ_at: int) -> int:
        fleet = simulate_fleet(records(differ_at), replicas=8, policy="consistent_hash", capacity=None, router=settings_)
        return fleet.replicas.filter(fleet.replicas["requests"] > 0).height

    assert used(hash_blocks) == 1  # blocks 1..hash_blocks shared: one key
    assert used(hash_blocks - 1) >= 6  # block number hash_blocks differs: 40 keys over 8 replicas
