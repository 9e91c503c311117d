"""``promptkit proxy`` as a user runs it: a subprocess in front of the fake upstream."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from promptkit.cli import main
from tests.proxy.fake_upstream import upstream_thread

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_proxy_command_forwards_records_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with upstream_thread() as up:
        proc = subprocess.Popen(
            [sys.executable, "-m", "promptkit.cli", "proxy", "--upstream", up.url, "--listen", "127.0.0.1:0",
             "--log", str(log), "--no-predict"],
            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            banner = proc.stderr.readline()
            assert banner.startswith("promptkit proxy on http://127.0.0.1:"), banner
            url = banner.split()[3]
            body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
            request = urllib.request.Request(
                url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as r:
                answer = json.loads(r.read())
            assert answer["choices"][0]["message"]["content"].startswith("Answer ")
            with urllib.request.urlopen(url + "/_promptkit/stats.json", timeout=30) as r:
                assert json.loads(r.read())["recording"]["written"] == 1
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    [line] = log.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["request"]["messages"] == [{"role": "user", "content": "hi"}]


def test_proxy_command_refuses_a_remote_address_without_allow_remote(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["proxy", "--upstream", "https://api.openai.com", "--listen", "0.0.0.0:8787"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert main(["proxy", "--upstream", "https://api.openai.com", "--listen", "nonsense"]) == 2


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_proxy_timeout_must_be_a_positive_number_of_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["proxy", "--upstream", "http://127.0.0.1:9", f"--timeout={value}"])
    assert code == 2  # a usage error, before anything listens
    assert "argument --timeout: expected a number of seconds" in capsys.readouterr().err
