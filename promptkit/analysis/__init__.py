"""Analysis: capacity curves, bytes per token of a model's KV cache, fleet simulation."""
