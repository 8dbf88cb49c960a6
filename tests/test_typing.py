"""mypy passes over the whole package, with its configuration in pyproject.toml.

mypy finds modules on disk, not through the import hook of an editable install, and the
stage folders at the root are installed as guiderag.<stage> (package-dir). So the check
runs over a tree of symbolic links laid out as the package is installed (kept under
.mypy_cache/, beside mypy's own cache, so reruns are quick).
"""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TREE = REPO / ".mypy_cache" / "package-tree"


def package_tree() -> Path:
    """TREE/guiderag/... : one symbolic link per file of guiderag/, one per stage folder."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    root = TREE / "guiderag"
    if root.exists():
        for link in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
            if link.is_symlink():
                link.unlink()
    root.mkdir(parents=True, exist_ok=True)
    for path in (REPO / mapping["guiderag"]).iterdir():
        if path.suffix in (".py", ".typed"):
            (root / path.name).symlink_to(path)
    for package, folder in mapping.items():
        parts = package.split(".")[1:]
        if len(parts) == 1:  # a stage folder; deeper packages come with it
            (root / parts[0]).symlink_to(REPO / folder, target_is_directory=True)
    return root


@pytest.mark.early  # mypy with a cold cache (a fresh checkout, CI): 15-20 s
def test_mypy_passes_on_the_package() -> None:
    package_tree()
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(REPO / ".mypy_cache"), "guiderag"],
        cwd=TREE, capture_output=True, text=True, timeout=600,
    )
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    checked = int(report.rsplit(" in ", 1)[1].split()[0])
    assert checked >= 60, report  # the whole package was checked, not an empty tree
