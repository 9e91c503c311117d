"""A third-party plugin (one provider profile, one log format) installed as a real package and found
through its entry points.

The plugin is built in ``tmp_path`` with a ``pyproject.toml`` naming its objects under the
``promptkit.providers`` and ``promptkit.formats`` entry-point groups, packed into a
wheel from that ``[project]`` table, installed with ``pip install --no-deps --target`` (pip writes the
``.dist-info`` with ``entry_points.txt``), and used
from a fresh interpreter whose ``sys.path`` holds the install target: the registries load entry points
once per process, through :mod:`importlib.metadata`, so a subprocess is the honest test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "promptkit-tinyplug"
version = "0.1.0"
requires-python = ">=3.11"

[project.entry-points."promptkit.providers"]
tinyprov = "tinyplug:PROFILE"

[project.entry-points."promptkit.formats"]
tinyfmt = "tinyplug:FORMAT"

[tool.setuptools]
packages = ["tinyplug"]
"""

PLUGIN = '''\
"""A tiny promptkit plugin: the "tinyprov" provider and the "tinyfmt" log format."""

import json

from promptkit.formats.base import LogFormat
from promptkit.layout import LoadProblem, RequestRecord
from promptkit.providers.registry import ProviderProfile

PROFILE = ProviderProfile(
    name="tinyprov",
    description="a made-up provider with an ideal prefix cache",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model="exact",
    model_patterns=(r"tiny-",),
)


def sniff(source):
    return source.name.endswith(".tiny")


def read(source):
    # one call per line: "<session> <json list of [role, content] pairs>"
    for lineno, text in source.lines():
        if not text.strip():
            continue
        session, _, rest = text.partition(" ")
        try:
            pairs = json.loads(rest)
        except json.JSONDecodeError as exc:
            yield LoadProblem(source.file, lineno, f"messages: invalid JSON ({exc.msg})")
            continue
        messages = [{"role": role, "content": content} for role, content in pairs]
        yield RequestRecord({"model": "tiny-1", "messages": messages}, session, file=source.file, line=lineno)


FORMAT = LogFormat(name="tinyfmt", description="tiny test format", sniff=sniff, read=read, priority=50)
'''

SCRIPT = """\
import json, sys
from promptkit.analysis.api import analyze
from promptkit.formats import available_formats
from promptkit.providers.registry import available_providers

r = analyze(sys.argv[1])
print(json.dumps({
    "formats": sorted(available_formats()),
    "providers": sorted(available_providers()),
    "provider": r.provider,
    "cache_model": str(r.cache_model),
    "sessions": r.requests["session"].to_list(),
    "prompt_tokens": r.requests["prompt_tokens"].to_list(),
    "predicted_cached": r.requests["predicted_cached_tokens"].to_list(),
    "problems": r.problems["reason"].to_list(),
    "lines": r.problems["line"].to_list(),
}))
"""


def _env(*paths: Path | str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def build_wheel(src: Path, out_dir: Path) -> Path:
    """A wheel of the pure-Python package in ``src``, assembled from its ``pyproject.toml`` ``[project]``
    table (name, version, entry points) the way a build backend writes one. Done by hand so the test needs
    no build backend (setuptools' ``bdist_wheel`` needs the ``wheel`` package) and no network."""
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    dist = f"{name.replace('-', '_')}-{version}"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: {project['requires-python']}\n"
    wheel_meta = "Wheel-Version: 1.0\nGenerator: promptkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry_points = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
        for group, items in project["entry-points"].items()
    )
    files = {p.relative_to(src).as_posix(): p.read_bytes() for p in sorted(src.rglob("*.py"))}
    files[f"{dist}.dist-info/METADATA"] = metadata.encode()
    files[f"{dist}.dist-info/WHEEL"] = wheel_meta.encode()
    files[f"{dist}.dist-info/entry_points.txt"] = entry_points.encode()
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n").encode()
    wheel = out_dir / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("plugin")
    src = base / "src"
    (src / "tinyplug").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "tinyplug" / "__init__.py").write_text(PLUGIN)
    wheel = build_wheel(src, base)
    target = base / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True, text=True, cwd=base,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return target


@pytest.mark.slow
def test_pip_wrote_the_entry_points_into_the_dist_info(installed_plugin: Path) -> None:
    entry_points = list(installed_plugin.glob("promptkit_tinyplug-0.1.0.dist-info/entry_points.txt"))
    assert len(entry_points) == 1
    text = entry_points[0].read_text()
    assert "[promptkit.providers]" in text and "tinyprov = tinyplug:PROFILE" in text
    assert "[promptkit.formats]" in text and "tinyfmt = tinyplug:FORMAT" in text


@pytest.mark.slow
def test_a_log_in_the_plugin_format_is_analyzed_with_the_plugin_provider(
    installed_plugin: Path, tmp_path: Path
) -> None:
    system = ["system", "You are terse. " * 40]
    log = tmp_path / "calls.tiny"
    log.write_text(
        "\n".join(
            [
                "s1 " + json.dumps([system, ["user", "hi"]]),
                "s1 " + json.dumps([system, ["user", "hi"], ["assistant", "hello"], ["user", "bye"]]),
                "s1 not json",
            ]
        )
        + "\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(ROOT, installed_plugin),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "tinyfmt" in result["formats"] and "tinyprov" in result["providers"]
    # the provider was inferred from the model name through the plugin's model pattern
    assert result["provider"] == "tinyprov"
    assert result["cache_model"].startswith("ExactCache(")
    assert result["sessions"] == ["s1", "s1"]
    first, second = result["prompt_tokens"]
    assert second > first > 80
    # the exact cache model credits the whole shared prefix of the second request, and nothing first
    assert result["predicted_cached"][0] == 0
    assert first - 10 < result["predicted_cached"][1] < second
    assert result["lines"] == [3] and "messages: invalid JSON" in result["problems"][0]


def test_without_the_plugin_on_the_path_the_format_is_unknown(tmp_path: Path) -> None:
    log = tmp_path / "calls.tiny"
    log.write_text("s1 []\n")
    code = "import sys\nfrom promptkit.formats import read_logs\nread_logs(sys.argv[1])\n"
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, env=_env(ROOT), timeout=120
    )
    assert out.returncode != 0
    assert "not a log of any known format" in out.stderr and "tinyfmt" not in out.stderr
