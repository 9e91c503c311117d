"""Log formats: one module per format, each sniffs a file and reads it into request records.

- :mod:`promptkit.formats.http_capture`: raw HTTP captures (claude-trace JSONL pairs, HAR 1.2), SSE
  reassembly and the OpenAI Responses API conversion, shared by the live capture wrapper and the proxy.
"""
