"""promptkit.formats.wire: what is redacted from recorded calls, how deep, and bounded body decoding."""

from __future__ import annotations

import gzip
import json
import re
import sys
import zlib
from typing import Any

import pytest
import zstandard

from promptkit.formats import http_capture
from promptkit.formats.wire import (
    REDACTED,
    HttpCaptureError,
    decode_body,
    default_patterns,
    exchange_record,
    is_secret_header,
    redact,
    redact_counted,
    redact_text,
    redact_url,
    safe_headers,
    url_credentials,
)

#: One key of each documented shape (made up, the right length and alphabet).
TOKENS = {
    "openai": "sk-proj-" + "a1B2" * 8,
    "anthropic": "sk-ant-api03-" + "Zz9_" * 8,
    "google": "AIza" + "S" * 35,
    "groq": "gsk_" + "q1W2e3R4" * 6,
    "huggingface": "hf_" + "aBcDeFgHiJ" * 3 + "kl12",
    "xai": "xai-" + "Xy12" * 10,
    "aws": "AKIA" + "ABCDEFGHIJKLMNOP",
    "aws-temporary": "ASIA" + "QRSTUVWXYZ234567",
    "github": "ghp_" + "a" * 36,
    "github-app": "ghs_" + "B" * 36,
    "github-fine-grained": "github_pat_" + "11ABCDEFG" + "x" * 13 + "_" + "y" * 59,
    "slack-bot": "xoxb-" + "1234567890-" + "aBcDeFgHiJkL",
    "slack-user": "xoxp-" + "9876543210-" + "ZyXwVuTsRq",
    "stripe-live": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe-restricted": "rk_test_" + "51HxYzAbCdEfGhIj",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nQw9x+/abc=\n-----END RSA PRIVATE KEY-----",
    "pem-pkcs8": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
}

#: Secrets that sit inside a larger shape: only the secret part goes, the words around it stay.
PARTS = [
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"),
    ("Basic YWxhZGRpbjpvcGVuc2VzYW1l=", "YWxhZGRpbjpvcGVuc2VzYW1l", "Basic [REDACTED]"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI",
     "aws_secret_access_key = [REDACTED]"),
    ('AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "wJalrXUtnFEMI",
     'AWS_SECRET_ACCESS_KEY="[REDACTED]"'),
    ("postgres://admin:hunter2@db.example.com:5432/app", "hunter2", "postgres://admin:[REDACTED]@db.example.com:5432/app"),
    ("DATABASE_URL=mysql://root:s3cr3t!@127.0.0.1/x", "s3cr3t", "DATABASE_URL=mysql://root:[REDACTED]@127.0.0.1/x"),
    ("mongodb+srv://u:p%40ss@cluster0.x.net/db", "p%40ss", "mongodb+srv://u:[REDACTED]@cluster0.x.net/db"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "secret", "expected"), PARTS)
def test_a_secret_inside_a_shape_is_redacted_and_its_words_kept(
    text: str, secret: str, expected: str
) -> None:
    out = redact({"content": f"config: {text} end"}, default_patterns())["content"]
    assert secret not in out
    assert out == f"config: {expected} end"


@pytest.mark.parametrize(
    "prose",
    [
        "see the risk-management-and-compliance-policy and the task-management-and-planning-guide",
        "the risk-assessment-2024-Q3-report-final and the desk-booking-2025-Policy are due",
        "the Basic understanding of caching; Basic Training sessions; BASIC programming",
        "https://docs.example.com/a:b@c and mailto:me@example.com and user@host:path",
        "sk-learn-style-hyphenated-words-without-digits and desk-top-publishing-and-layout-tools",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
    ],
)
def test_prose_that_looks_like_a_key_is_left_alone(prose: str) -> None:
    assert redact({"content": prose}, default_patterns()) == {"content": prose}


def test_a_private_key_without_its_end_costs_a_bounded_scan() -> None:
    text = "-----BEGIN PRIVATE KEY-----\n" + "A" * 40_000
    assert redact({"c": text}, default_patterns()) == {"c": text}  # no END: nothing to cut, text kept


def test_free_text_loses_url_credentials_and_key_shapes() -> None:
    said = redact_text(
        "POST http://h.example/v1/messages?key=q-SECRET-1&alt=json failed: sk-proj-" + "a1B2" * 8
    )
    assert "q-SECRET-1" not in said and "a1B2" not in said
    assert said.startswith("POST http://h.example/v1/messages?key=%5BREDACTED%5D&alt=json failed: ")


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_every_known_key_shape_is_redacted_wherever_it_appears(name: str) -> None:
    token = TOKENS[name]
    body = {"messages": [{"role": "user", "content": f"my key: {token}, keep it safe"}], token: "as a key"}
    out = redact(body, default_patterns())
    text = json.dumps(out)
    assert token not in text
    assert out["messages"][0]["content"] == f"my key: {REDACTED}, keep it safe"


def test_ordinary_text_is_left_alone() -> None:
    text = "the task asks for a sketch; hf_hub is a module; AKIA is a word; gsk_x is short; ask-me"
    assert redact({"content": text, "max_tokens": 64}, default_patterns()) == {
        "content": text,
        "max_tokens": 64,
    }


@pytest.mark.parametrize(
    "field", ["api_key", "apiKey", "x-api-key", "client_secret", "password", "access_token", "Authorization"]
)
def test_body_fields_that_hold_credentials_are_redacted(field: str) -> None:
    out = redact({"model": "m", "auth": {field: "plain-value-42"}, "prompt_tokens": 5}, default_patterns())
    assert out == {"model": "m", "auth": {field: REDACTED}, "prompt_tokens": 5}


@pytest.mark.parametrize("value", [["x-secret-1"], {"value": "x-secret-1"}, [{"k": "x-secret-1"}], 12345])
def test_a_secret_field_holding_a_list_or_an_object_is_redacted_whole(value: Any) -> None:
    out = redact({"password": value, "Authorization": value, "api_key": None, "n": 1}, default_patterns())
    assert out == {"password": REDACTED, "Authorization": REDACTED, "api_key": None, "n": 1}


@pytest.mark.parametrize(
    "query", ["access-token", "access_token", "auth", "sig", "signature", "client_secret", "password",
              "x-api-key", "api_key", "apikey", "key", "token", "refresh_token", "X-Amz-Signature"],
)  # fmt: skip
def test_credential_query_values_are_redacted(query: str) -> None:
    url = f"https://api.example.com/v1/chat/completions?{query}=s3cr3t-v4lue&alt=json"
    out = redact_url(url)
    assert "s3cr3t-v4lue" not in out and "alt=json" in out and query in out


def test_url_user_info_loses_its_password_and_keeps_the_user() -> None:
    assert (
        redact_url("http://alice:pw-1@h.example:8080/v1?x=1")
        == "http://alice:%5BREDACTED%5D@h.example:8080/v1?x=1"
    )
    assert "tok-2" not in redact_url("https://tok-2@h.example/v1")  # a token as the user name alone
    assert url_credentials("http://a%40b:p%3Aw@h.example/v1") == ("http://h.example/v1", "a@b", "p:w")


def test_an_exchange_record_never_holds_url_credentials() -> None:
    record = exchange_record(
        url="https://bob:hunter2@api.openai.com/v1/chat/completions?api_key=abc",
        request_body=b'{"model": "gpt-4o", "messages": []}', status=200, response_body=None,
    )  # fmt: skip
    assert "hunter2" not in json.dumps(record) and "abc" not in record["http"]["url"]


@pytest.mark.parametrize(
    "header",
    ["Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Custom-Token", "X-Vendor-Key",
     "X-Client-Secret", "Cookie", "Set-Cookie", "X-Goog-Api-Key", "X-Amz-Security-Token", "X-Session-Id",
     "X-Amz-Signature", "X-Hub-Signature-256", "Stripe-Signature", "X-Password", "X-Credential"],
)  # fmt: skip
def test_every_header_that_can_carry_a_credential_is_secret(header: str) -> None:
    assert is_secret_header(header) and is_secret_header(header.upper())
    assert safe_headers({header: "v", "Accept": "application/json"}) == {"accept": "application/json"}


def test_redaction_walks_any_depth_without_recursion() -> None:
    depth = sys.getrecursionlimit() * 20
    value: Any = "sk-proj-" + "d" * 30
    for _ in range(depth):
        value = [value]
    out, cut = redact_counted(value, default_patterns())  # no RecursionError
    assert cut == 1
    for _ in range(128):
        out = out[0]
    assert out == "[REDACTED: nested deeper than 128 levels]"
    shallow, cut = redact_counted({"a": [[{"k": "sk-proj-" + "eE" * 15}]]}, default_patterns())
    assert cut == 0 and shallow == {"a": [[{"k": REDACTED}]]}


def test_user_patterns_add_to_the_defaults() -> None:
    patterns = [*default_patterns(), re.compile(r"\d{4}-\d{4}")]
    assert redact({"c": "card 1234-5678"}, patterns) == {"c": f"card {REDACTED}"}


def test_the_capture_reader_still_exports_the_wire() -> None:
    assert http_capture.redact_url is redact_url and http_capture.decode_body is decode_body


# ---------------------------------------------------------------------------------------------------
# content encodings


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd"])
def test_a_truncated_body_is_an_error(coding: str) -> None:
    data = json.dumps({"choices": [{"message": {"content": "x" * 5000}}]}).encode() * 20
    packed = {"gzip": gzip.compress, "deflate": zlib.compress, "zstd": zstandard.ZstdCompressor().compress}[
        coding
    ](data)
    assert decode_body(packed, coding) == data
    with pytest.raises(HttpCaptureError, match=f"broken {coding} data"):
        decode_body(packed[: len(packed) // 2], coding)


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_body_that_expands_past_the_limit_is_not_decoded(coding: str) -> None:
    data = b"0" * 2_000_000
    packed = gzip.compress(data) if coding == "gzip" else zstandard.ZstdCompressor().compress(data)
    with pytest.raises(HttpCaptureError, match="decodes to more than 100000 bytes"):
        decode_body(packed, coding, limit=100_000)
    assert decode_body(packed, coding, limit=len(data)) == data
