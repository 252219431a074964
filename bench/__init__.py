"""The benchmark: `make bench`. Bench-only code; `project/asgi.py` never routes to it."""
