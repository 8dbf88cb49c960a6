"""Evaluation: a question workbook in, a scored results workbook out; the JSQuAD dev benchmark.

Modules: `workbook` (read questions, write results), `metrics` (per-answer and summary
metrics), `runner` (ask each question in a fresh session), `compare` (paired bootstrap of
two result workbooks), `jsquad` + `site_builder` (the JSQuAD guidebook-like site),
`devbench` (build, serve, scrape, evaluate, one table), `commands` (the CLI entry points).
"""
