#!/usr/bin/env bash
# Installs guiderag and opens the chat on the bundled sample guideline
# (the first run scrapes it from a loopback server and builds the index).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -e .
exec python3 -m streamlit run app.py --server.headless true --server.address "${GUIDERAG_HOST:-127.0.0.1}" --server.port "${GUIDERAG_PORT:-8501}" --browser.gatherUsageStats false
