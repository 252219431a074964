"""Optional apps a host project installs beside `messaging` or leaves out (docs/ARCHITECTURE.md)."""
