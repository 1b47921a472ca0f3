"""The REST API and web form (FastAPI + jinja2): thin handlers over `advisor/`.

The only package that imports fastapi; `advisor serve` imports it inside its `run`.
"""
