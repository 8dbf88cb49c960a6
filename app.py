"""The chat for patients and families: `streamlit run app.py` (what `guiderag chat` runs).

The page itself is guiderag.ui.page; this file is only what Streamlit is pointed at.
Streamlit runs it as `__main__`; a process that multiprocessing spawns re-imports the
parent's main script as `__mp_main__` (a test process whose last Streamlit AppTest left
this file as its main, then an evaluation's worker pool), and must not draw the page.
"""
from guiderag.ui.page import main

if __name__ != "__mp_main__":
    main()
