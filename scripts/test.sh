#!/usr/bin/env bash
# Installs everything the test suite needs (Debian packages for the browser test, the
# project with its test extras in .venv) and runs the whole suite, in one pytest-xdist
# worker per core (-n auto; -n 0 runs it in one process). Extra arguments go to pytest
# (e.g. -m "not browser and not slow and not model" for the quick subset, see README).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# grep -c reads to the end (with -q, fc-list dies of SIGPIPE and pipefail calls the font missing)
cjk_fonts=$(fc-list 2>/dev/null | grep -ci "Noto Sans CJK" || true)
[ "${cjk_fonts:-0}" -gt 0 ] || need_apt+=(fonts-noto-cjk)
# PostgreSQL's server programs (initdb, pg_ctl): the tests start their own server
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt_install "${need_apt[@]}" || { echo "error: cannot install ${need_apt[*]} (need root or sudo)" >&2; exit 1; }
fi

ensure_venv test,llm
# Python's bytecode caches (__pycache__/, ignored by git) are written even where the shell
# sets PYTHONDONTWRITEBYTECODE: without them every test worker, and every `python -m
# guiderag` a test starts, compiles the package and the test modules again.
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n auto "$@"
