"""The HTTP API for other systems (a patient portal, an EHR): `guiderag serve`.

- `service`: what a process serves from, loaded once and reloaded atomically when the corpus
  changes (a scrape by another process);
- `app`: the FastAPI application, its routes, limits, authentication and JSON errors;
- `commands`: `guiderag serve` on uvicorn.
"""
