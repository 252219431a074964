"""The two yardsticks of the benchmark. Never routed in production.

`EchoConsumer` is the ceiling: the same server stack (daphne, channels, the
auth middleware) answering each command with an ack and nothing else.

`TutorialConsumer` is what chat tutorials teach, made "idempotent" the way
blog posts do it: look the id up in the cache, create the row with the ORM,
set the cache, `group_send`. It is not correct: two copies that arrive
together both miss the cache and both insert, a crash between insert and
cache set loses the dedup, and there are no per-room sequence numbers. It
answers in the protocol's frame shapes so the same load generator drives it.
"""

from __future__ import annotations

import json

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.cache import cache

from .models import ChatMessage


class EchoConsumer(AsyncWebsocketConsumer):
    async def receive(self, text_data=None, bytes_data=None):
        frame = orjson.loads(text_data)
        ack = {"t": "ack", "id": frame["id"], "ok": True, "dup": False, "d": {}}
        await self.send(text_data=orjson.dumps(ack).decode())


class TutorialConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.room_name = self.scope["url_route"]["kwargs"]["room"]
        self.room_group_name = f"chat_{self.room_name}"
        await self.channel_layer.group_add(self.room_group_name, self.channel_name)
        await self.accept()

    async def disconnect(self, close_code):
        await self.channel_layer.group_discard(self.room_group_name, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        data = json.loads(text_data)
        user = self.scope["user"]
        key = f"chat:{user.id}:{data['id']}"
        ack = await cache.aget(key)
        if ack is not None:
            await self.send(text_data=json.dumps({**ack, "dup": True}))
            return
        message = await self.save_message(user, data["id"], data["d"]["body"])
        ack = {
            "t": "ack",
            "id": data["id"],
            "ok": True,
            "d": {"room": self.room_name, "seq": message.id, "at": message.timestamp.isoformat()},
        }
        await cache.aset(key, ack, 3600)
        await self.channel_layer.group_send(
            self.room_group_name,
            {"type": "chat.message", "message": message.content, "user": user.username, "id": message.id},
        )
        await self.send(text_data=json.dumps({**ack, "dup": False}))

    @database_sync_to_async
    def save_message(self, user, client_id, content):
        return ChatMessage.objects.create(room=self.room_name, user=user, client_id=client_id, content=content)

    async def chat_message(self, event):
        msg = {"room": self.room_name, "seq": event["id"], "body": event["message"], "sender": event["user"]}
        await self.send(text_data=json.dumps({"t": "msg", "d": msg}))
