"""Time to first token in a fleet: prefill throughput per replica, FCFS queues, decode occupancy.

The model, kept small enough to check against closed forms:

- each replica prefills one request at a time, first come first served, at ``prefill_tokens_per_s``;
  a request's service time is its **uncached** input tokens over that rate (what it read from a cache
  costs nothing), so it waits for the requests before it on its replica, then prefills;
- its time to first token (TTFT) is that wait plus its own prefill: the first token comes out when the
  prefill ends;
- it then decodes its ``output_length`` tokens at ``decode_tokens_per_s`` (per request; continuous
  batching runs many at once, so decoding does not hold up the next prefill): from arrival to the end
  of decoding the request is *in flight* on its replica and holds its blocks there, which is what the
  load-aware routing policies and the KV-utilisation scorer read.

The rates come from the command line (``--prefill-rate`` / ``--decode-rate``, tokens/s) or from a
model and a GPU profile (:func:`latency_for`): prefill is compute-bound, ``2 × active parameters``
FLOPs per token at ``mfu`` of the GPUs' dense BF16 peak; decode is bandwidth-bound, the active weights
read once per token at ``mbu`` of the memory bandwidth. Both are rough (no attention FLOPs, no batching
effects); give measured rates where you have them.

Closed forms (``tests/analysis/test_fleet_latency.py``): on an idle replica TTFT = uncached tokens /
rate; Poisson arrivals at rate λ on one replica with a fixed service time D (an M/D/1 queue at load
ρ = λD) wait ρ·D / (2(1 − ρ)) on average.

>>> model = LatencyModel(prefill_tokens_per_s=10_000.0)
>>> queue = ReplicaQueue()
>>> [round(queue.admit(arrival=0.0, uncached_tokens=5_000, model=model).ttft, 3) for _ in range(2)]
[0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

from promptkit.errors import UsageError

__all__ = [
    "GPU_PROFILES",
    "MODEL_PARAMETERS",
    "Admission",
    "GpuProfile",
    "LatencyModel",
    "ReplicaQueue",
    "gpu_profile",
    "latency_for",
    "percentiles",
]


def _positive(instance: object, attribute: attrs.Attribute[float], value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{attribute.name} must be a number > 0, got {value!r}")


@attrs.frozen(slots=True)
class LatencyModel:
    """Prefill throughput of one replica (tokens/s) and, optionally, one request's decode speed.

    ``decode_tokens_per_s`` None: decoding is not modelled (a request leaves its replica when its
    first token comes out).

    >>> LatencyModel(0)
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: prefill_tokens_per_s must be a number > 0, got 0
    """

    prefill_tokens_per_s: float = attrs.field(validator=_positive)
    decode_tokens_per_s: float | None = attrs.field(default=None, validator=_positive)

    def decode_seconds(self, output_tokens: int) -> float:
        """Seconds to decode ``output_tokens`` (0 when decoding is not modelled)."""
        if self.decode_tokens_per_s is None:
            return 0.0
        return output_tokens / self.decode_tokens_per_s


@attrs.frozen(slots=True)
class Admission:
    """When a request's prefill starts and ends, its TTFT and when it leaves its replica (seconds)."""

    start: float
    first_token: float
    ttft: float
    end: float


class ReplicaQueue:
    """One replica's FCFS prefill queue: requests are admitted in arrival order."""

    __slots__ = ("free_at",)

    def __init__(self) -> None:
        self.free_at = 0.0

    def admit(
        self, *, arrival: float, uncached_tokens: int, model: LatencyModel, output_tokens: int = 0
    ) -> Admission:
        """Queue a request arriving at ``arrival`` with ``uncached_tokens`` to prefill."""
        start = max(arrival, self.free_at)
        first = start + uncached_tokens / model.prefill_tokens_per_s
        self.free_at = first
        return Admission(start, first, first - arrival, first + model.decode_seconds(output_tokens))


@attrs.frozen(slots=True)
class GpuProfile:
    """A GPU's dense BF16 peak (FLOP/s) and memory bandwidth (bytes/s), ``count`` of them per replica."""

    name: str
    bf16_flops: float
    memory_bandwidth: float
    count: int = 1


#: Datasheet figures (dense BF16 tensor FLOP/s without sparsity, HBM bandwidth): NVIDIA's H100
#: (https://www.nvidia.com/en-us/data-center/h100/, SXM), H200 (https://www.nvidia.com/en-us/data-center/h200/),
#: A100 80GB SXM (https://www.nvidia.com/en-us/data-center/a100/), L40S
#: (https://www.nvidia.com/en-us/data-center/l40s/) and B200 (https://www.nvidia.com/en-us/data-center/dgx-b200/,
#: per GPU) pages.
GPU_PROFILES: Final[dict[str, GpuProfile]] = {
    "h100": GpuProfile("h100", 989e12, 3.35e12),
    "h200": GpuProfile("h200", 989e12, 4.8e12),
    "a100": GpuProfile("a100", 312e12, 2.039e12),
    "l40s": GpuProfile("l40s", 362e12, 0.864e12),
    "b200": GpuProfile("b200", 2250e12, 8e12),
}

#: Parameters (total, active per token) of the built-in models of
#: :data:`~promptkit.analysis.kv_bytes.KNOWN_MODELS`, from their model cards.
MODEL_PARAMETERS: Final[dict[str, tuple[float, float]]] = {
    "llama-3.1-8b": (8.03e9, 8.03e9),
    "llama-3.1-70b": (70.6e9, 70.6e9),
    "qwen2.5-7b": (7.61e9, 7.61e9),
    "qwen3-32b": (32.8e9, 32.8e9),
    "mistral-7b-v0.1": (7.24e9, 7.24e9),
    "gemma-3-27b": (27.4e9, 27.4e9),
    "gpt-oss-120b": (117e9, 5.1e9),
    "deepseek-v3": (671e9, 37e9),
}


def gpu_profile(text: str) -> GpuProfile:
    """``h100`` or ``8xh100`` (eight GPUs serve one replica).

    >>> gpu_profile("8xH100").count, gpu_profile("a100").bf16_flops
    (8, 312000000000000.0)
    >>> gpu_profile("tpu")
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: unknown GPU profile 'tpu'; known: h100, h200, a100, l40s, b200 (as NAME or COUNTxNAME)
    """
    raw = text.strip().lower()
    count, name = 1, raw
    head, sep, tail = raw.partition("x")
    if sep and head.isdigit():
        count, name = int(head), tail
    profile = GPU_PROFILES.get(name)
    if profile is None or count < 1:
        raise UsageError(
            f"unknown GPU profile {text!r}; known: {', '.join(GPU_PROFILES)} (as NAME or COUNTxNAME)"
        )
    return attrs.evolve(profile, count=count)


def latency_for(model: str, gpu: GpuProfile, *, mfu: float = 0.4, mbu: float = 0.6) -> LatencyModel:
    """Rates of ``model`` (a name of :data:`MODEL_PARAMETERS`) on ``gpu``: prefill
    ``count × bf16_flops × mfu / (2 × active parameters)`` tokens/s; decode
    ``count × memory_bandwidth × mbu / (2 bytes × active parameters)`` tokens/s.

    >>> round(latency_for("llama-3.1-8b", gpu_profile("h100")).prefill_tokens_per_s)
    24633
    """
    params = MODEL_PARAMETERS.get(model)
    if params is None:
        raise UsageError(
            f"no parameter count for model {model!r} (known: {', '.join(MODEL_PARAMETERS)}); "
            "give the prefill rate in tokens/s instead (--prefill-rate)"
        )
    active = params[1]
    prefill = gpu.count * gpu.bf16_flops * mfu / (2.0 * active)
    decode = gpu.count * gpu.memory_bandwidth * mbu / (2.0 * active)
    return LatencyModel(prefill, decode)


def percentiles(values: Sequence[float], points: Sequence[float] = (50, 90, 99)) -> list[float | None]:
    """The ``points`` percentiles of ``values`` (linear interpolation); None for no values.

    >>> percentiles([1.0, 2.0, 3.0, 4.0])
    [2.5, 3.7, 3.97]
    """
    if not values:
        return [None for _ in points]
    import numpy as np

    return [round(float(v), 12) for v in np.percentile(np.asarray(values, dtype=float), list(points))]
