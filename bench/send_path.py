"""`python -m bench.send_path`: the server's CPU per frame on one uvicorn connection, by send path.

A study of the uvicorn adapter (messaging/transport/servers/uvicorn.py) apart
from the rest of the full path, whose batch cycle and database hide it on a
shared machine: a real `WebSocketsSansIOProtocol` on a real socket (a
socketpair whose other end a child process reads and discards), the app's
send buffer made by `send_buffer` as the consumer makes it, and a room's
frame (one str, encoded once) sent `--per-turn` times per turn of the loop.
CPU is this process's (user and system), over the frames and their drain:

* `asgi`: the generic buffer, a task through uvicorn's ASGI `send`;
* `adapter`: the uvicorn adapter, each frame written to the transport.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import time

from messaging.transport.servers import send_buffer

FRAME = (
    '{"t":"msg","d":{"room":"bench-room-0","seq":12345,"id":"0123456789abcdef0123456789abcdef",'
    '"sender":{"id":42,"name":"bench42"},"body":"hello, room","at":"2026-12-01T16:00:00.000Z",'
    '"version":1,"rev":12345}}'
)
HANDSHAKE = (
    b"GET /ws/ HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def discard_in_child(sock: socket.socket, other: socket.socket) -> int:
    pid = os.fork()
    if pid == 0:
        other.close()
        try:
            while sock.recv(1 << 20):
                pass
        finally:
            os._exit(0)
    return pid


async def run(path: str, frames: int, per_turn: int) -> float:
    """CPU seconds per frame of `frames` frames on one connection by `path`."""
    from uvicorn.config import Config
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    from uvicorn.server import ServerState

    loop = asyncio.get_running_loop()
    sends: asyncio.Queue = asyncio.Queue()
    done = asyncio.Event()

    async def app(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        await sends.put(send)
        await done.wait()

    config = Config(app=app, ws="websockets-sansio", ws_per_message_deflate=False, lifespan="off", log_level="warning")
    config.load()
    server_end, client_end = socket.socketpair()
    client_end.sendall(HANDSHAKE)
    child = discard_in_child(client_end, server_end)
    client_end.close()
    protocol = WebSocketsSansIOProtocol(config, ServerState(), {}, _loop=loop)
    await loop.connect_accepted_socket(lambda: protocol, server_end)
    send = await sends.get()
    buffer = send_buffer(send, 1 << 40, lambda *_: None, adapters=path == "adapter")
    assert buffer.adapter == ("asgi" if path == "asgi" else "uvicorn"), buffer
    text = FRAME
    started = time.process_time()
    for _ in range(frames // per_turn):
        for _ in range(per_turn):
            buffer.send(text)
        await asyncio.sleep(0)
        if buffer.pushed_back:
            await buffer.room()
    while buffer.waiting or (buffer.task is not None and not buffer.task.done()):
        await asyncio.sleep(0.001)
    spent = time.process_time() - started
    done.set()
    protocol.transport.close()
    await asyncio.sleep(0.01)
    os.waitpid(child, 0)
    return spent / frames


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=200_000)
    p.add_argument("--per-turn", type=int, default=16, help="frames sent to the socket per turn of the loop")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")
    p.add_argument("--rounds", type=int, default=3, help="interleaved; the median is reported")
    args = p.parse_args()
    if args.loop == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    paths = ["asgi", "adapter"]
    results: dict[str, list[float]] = {path: [] for path in paths}
    for _ in range(args.rounds):
        for path in paths:
            results[path].append(asyncio.run(run(path, args.frames, args.per_turn)))
    print(f"{args.loop}, {args.per_turn} frames per turn, {args.frames} frames, {len(FRAME)} bytes each")
    print("| path | CPU us per frame (median) | rounds |")
    print("| --- | --- | --- |")
    for path in paths:
        rounds = sorted(results[path])
        print(
            f"| {path} | {rounds[len(rounds) // 2] * 1e6:.2f} | {'/'.join(f'{r * 1e6:.2f}' for r in results[path])} |"
        )


if __name__ == "__main__":
    main()
