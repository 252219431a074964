"""The transport: the Channels consumer, the server adapters (daphne's frame writer, close codes), the fan-out hub, and the handshake's guards."""
