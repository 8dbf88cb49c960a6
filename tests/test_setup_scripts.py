"""The README's set-up commands: a project virtual environment, and clear words when the
machine's Python cannot make one (Debian without python3-venv)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_commands_are_the_scripts_and_ci_runs_the_test_one() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/chat.sh" in readme and "bash scripts/test.sh" in readme
    assert re.search(r"^bash scripts/test\.sh\b", (REPO / ".ci" / "run").read_text(encoding="utf-8"), re.M)
    for script in ("chat.sh", "test.sh"):
        text = (REPO / "scripts" / script).read_text(encoding="utf-8")
        assert "ensure_venv" in text and "pip install" not in text  # never into the system Python


def test_a_python_without_venv_gets_the_command_to_run(tmp_path: Path) -> None:
    """`python3 -m venv` fails and apt-get cannot help: the script says what to install and
    stops, leaving no half-made .venv behind."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "venv.sh", project / "scripts" / "venv.sh")
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_python = bin_dir / "python3-without-venv"
    fake_python.write_text('#!/bin/sh\n[ "$1 $2" = "-m venv" ] && { mkdir -p "$3"; echo "ensurepip is not available" >&2; exit 1; }\nexit 0\n')
    fake_apt = bin_dir / "apt-get"
    fake_apt.write_text("#!/bin/sh\necho 'E: Unable to locate package' >&2\nexit 100\n")
    for f in (fake_python, fake_apt):
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GUIDERAG_PYTHON=str(fake_python))
    proc = subprocess.run(["bash", "-c", ". scripts/venv.sh && ensure_venv test"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "sudo apt-get install python3-venv" in proc.stderr
    assert not (project / ".venv").exists()
