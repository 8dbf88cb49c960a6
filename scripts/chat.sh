#!/usr/bin/env bash
# Installs guiderag into the project's virtual environment (.venv) and opens the chat on the
# bundled sample guideline (the first run scrapes it from a loopback server and builds the
# index). The store is the default one (README, "Where the data lives") unless GUIDERAG_DB is set.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
ensure_venv ""
exec .venv/bin/guiderag chat --host "${GUIDERAG_HOST:-127.0.0.1}" --port "${GUIDERAG_PORT:-8501}"
