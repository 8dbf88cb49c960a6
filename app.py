"""The chat for patients and families: `streamlit run app.py` (what `guiderag chat` runs).

The page itself is guiderag.ui.page; this file is only what Streamlit is pointed at.
Streamlit runs it as __main__ (and leaves it in sys.modules as __main__); the guard keeps
a process spawned later by the same interpreter (eval's workers import the parent's main
module as __mp_main__) from drawing the page.
"""
from guiderag.ui.page import main

if __name__ == "__main__":
    main()
