"""The wheel, installed into a fresh virtual environment outside the checkout, works.

Built from this checkout, it must install exactly one top-level package (`guiderag`), carry
its bundled data (sample site, synonyms, question sets), and from a folder that is not
the checkout scrape the sample, answer a question exactly as the checkout does, and run
the bundled protocol question set. Dependencies come from the package index (pip's
cache makes a second run quick).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QUESTION = "胸腺腫瘍にはどのような治療法がありますか？"
pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUIDERAG_", "OPENAI_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(XDG_DATA_HOME=str(home / "data"), GUIDERAG_PROGRESS="0")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Built from a copy: setuptools leaves build/ behind, whose stale files would go into
    # the next wheel built from the checkout.
    source = tmp_path_factory.mktemp("source") / "guiderag"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", ".mypy_cache", "__pycache__", ".pytest_cache", ".hypothesis", "artifacts"))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        cwd=out, env=dict(os.environ))
    (path,) = out.glob("guiderag-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory) -> Path:
    """A fresh venv (of the interpreter running the tests) with the wheel installed; its bin/."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", str(venv)], cwd=venv.parent, env=dict(os.environ))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run(pip + ["wheel"], cwd=venv.parent, env=dict(os.environ))
    run(pip + [str(wheel)], cwd=venv.parent, env=dict(os.environ), timeout=1500)
    return venv / "bin"


def test_the_wheel_installs_one_top_level_package_with_its_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert z.read(top_level).decode().split() == ["guiderag"]
    assert {n.split("/")[0] for n in names} == {"guiderag", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    for needed in ("guiderag/data/synonyms.tsv", "guiderag/data/sample_site/guide/index.html",
                   "guiderag/data/sample_site/content_pages.txt", "guiderag/eval/questions/protocol.xlsx",
                   "guiderag/py.typed", "guiderag/store/pages.py", "guiderag/ui/page.py"):
        assert needed in names, needed


def test_the_installed_wheel_scrapes_answers_and_evaluates_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = clean_env(tmp_path)
    guiderag = str(installed / "guiderag")
    where = run([str(installed / "python"), "-c", "import guiderag; print(guiderag.__file__)"], work, env).stdout
    assert str(REPO) not in where and "site-packages" in where  # the wheel, not the checkout
    scraped = run([guiderag, "scrape", "--sample"], work, env)
    assert "added 32" in scraped.stdout
    assert (tmp_path / "data" / "guiderag" / "guiderag.db").is_file()  # the documented default store
    answer = json.loads(run([guiderag, "ask", QUESTION, "--json"], work, env).stdout)
    assert answer["coverage"] == "governed" and answer["passages"]
    questions = run([str(installed / "python"), "-c",
                     "from guiderag.resources import question_set; print(question_set('protocol.xlsx'))"],
                    work, env).stdout.strip()
    evaluated = run([guiderag, "eval", questions, "--out", str(work / "results.xlsx"), "--json"], work, env)
    summary = json.loads(evaluated.stdout)["summary"]
    assert summary["coverage_in_scope"] == 1.0 and summary["refusal_rate_out_of_scope"] == 1.0
    assert (work / "results.xlsx").is_file()

    # the same answer as the checkout gives (same analyzer, synonyms and index)
    here = tmp_path / "checkout-data"
    env_here = dict(env, XDG_DATA_HOME=str(here))
    run([sys.executable, "-m", "guiderag", "scrape", "--sample"], REPO, env_here)
    mine = json.loads(run([sys.executable, "-m", "guiderag", "ask", QUESTION, "--json"], REPO, env_here).stdout)
    for key in ("coverage", "answer", "keywords"):
        assert answer[key] == mine[key], key
    assert [p["lines"] for p in answer["passages"]] == [p["lines"] for p in mine["passages"]]
