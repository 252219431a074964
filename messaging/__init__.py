"""messaging: exactly-once real-time chat over WebSockets for Django Channels."""

__version__ = "0.1.0"
