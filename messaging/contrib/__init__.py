"""Apps beside the core that a host installs or leaves out, each with its own models and migrations."""
