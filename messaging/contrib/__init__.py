"""Optional apps a host project installs beside `messaging` or leaves out, each with its own
models, migrations, templates or static files (docs/ARCHITECTURE.md)."""
