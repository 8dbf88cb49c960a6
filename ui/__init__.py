"""The chat page (Streamlit) and what it is built from.

- `text`: the words and style of the page; `render`: its HTML, pure functions with every
  text escaped; `session`: one question answered, the retriever loaded once per process;
  `bootstrap`: the first run on an empty store; `page`: the Streamlit layer (`main`).
"""
