"""The HTTP API: commands over HTTP (`POST /api/commands`) with API tokens or the session, and its OpenAPI document."""
