"""The chat for patients and families: `streamlit run app.py` (what `guiderag chat` runs).

The page itself is guiderag.ui.page; this file is only what Streamlit is pointed at.
"""
from guiderag.ui.page import main

main()
