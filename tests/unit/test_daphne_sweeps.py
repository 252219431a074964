"""The wheel of daphne's sweeps: who is visited when, and the deadlines it keeps (messaging/transport/daphne_sweeps.py)."""

from __future__ import annotations

import asyncio

from messaging.transport.daphne_sweeps import SLOT_SECONDS, PongDeadline, Reaped, Sweeps, next_deadline


class Socket:
    """Stands for daphne's WebSocket protocol: the wheel tells them apart by class."""


class Request:
    """Any other connection: an HTTP request, an event stream."""


def test_a_socket_is_visited_by_the_first_pass_after_its_deadline_at_the_latest():
    sweeps, socket = Sweeps(Socket, {}, now=100.0), Socket()
    sweeps.schedule(socket, 120.5)
    for now in (102.0, 110.0, 118.2):
        assert sweeps.due(now) == []
    # A pass in the deadline's own slot, before it: visited early; its
    # check finds nothing due yet and puts it back for the next pass.
    assert sweeps.due(120.2) == [socket]
    sweeps.schedule(socket, 120.5)
    assert sweeps.due(120.2 + SLOT_SECONDS) == [socket]


def test_a_pass_late_by_several_slots_visits_everything_it_missed_once():
    sweeps = Sweeps(Socket, {}, now=0.0)
    early, late = Socket(), Socket()
    sweeps.schedule(early, 4.0)
    sweeps.schedule(late, 9.0)
    assert sorted(map(id, sweeps.due(30.0))) == sorted(map(id, [early, late]))
    assert sweeps.due(32.0) == []


def test_a_deadline_already_passed_is_visited_by_the_next_pass_not_the_one_under_way():
    sweeps, socket = Sweeps(Socket, {}, now=0.0), Socket()
    assert sweeps.due(10.0) == []
    sweeps.schedule(socket, 3.0)  # as a visit reschedules a ping that was not due yet
    assert sweeps.due(10.5) == []
    assert sweeps.due(12.0) == [socket]


def test_other_connections_are_visited_every_pass_until_they_close():
    sweeps, request = Sweeps(Socket, {}, now=0.0), Request()
    sweeps.connected(request, 0.0)
    assert sweeps.due(2.0) == [request]
    assert sweeps.due(4.0) == [request]
    sweeps.disconnected(request, close_timeout=10.0, now=5.0)
    assert sweeps.due(6.0) == []


def test_a_closed_socket_leaves_the_wheel_and_is_reaped_now_and_at_its_close_timeout():
    sweeps, socket = Sweeps(Socket, {}, now=0.0), Socket()
    sweeps.connected(socket, 0.0)
    sweeps.disconnected(socket, close_timeout=10.0, now=1.0)
    assert sweeps.slot_of == {}
    assert sweeps.due(40.0) == []
    assert sweeps.to_reap(now=2.0) == {socket}
    assert sweeps.to_reap(now=3.0) == set()
    assert sweeps.to_reap(now=11.0) == {socket}  # its application must be done by now: cancelled if not
    assert sweeps.to_reap(now=12.0) == set()


def test_a_finished_application_is_reaped_by_the_next_pass_only():
    sweeps, socket = Sweeps(Socket, {}, now=0.0), Socket()
    sweeps.finished(socket)
    assert sweeps.to_reap(now=1.0) == {socket}
    assert sweeps.to_reap(now=2.0) == set()


async def test_an_application_that_ends_has_its_connection_reaped_by_the_next_pass():
    sweeps, socket = Sweeps(Socket, {}, now=0.0), Socket()
    application = asyncio.ensure_future(asyncio.sleep(0))
    application.add_done_callback(Reaped(sweeps, socket))
    assert sweeps.to_reap(now=1.0) == set()
    await application
    await asyncio.sleep(0)  # done callbacks run a turn later
    assert sweeps.to_reap(now=2.0) == {socket}


def test_applied_to_a_running_server_every_connection_is_visited_once_then_when_due():
    socket, request = Socket(), Request()
    sweeps = Sweeps(Socket, {socket: {}, request: {}}, now=50.0)
    assert sweeps.to_reap(now=50.5) == {socket, request}
    assert sorted(map(id, sweeps.due(52.0))) == sorted(map(id, [socket, request]))
    assert sweeps.due(54.0) == [request]


class Daphne:
    """Stands for daphne's server: the timeouts a socket's deadlines are made of."""

    websocket_connect_timeout, ping_interval, websocket_timeout = 5.0, 20.0, -1.0


class Protocol:
    """Stands for daphne's WebSocket protocol as `next_deadline` reads it (autobahn's states), open."""

    STATE_CLOSED, STATE_CONNECTING, STATE_CLOSING, STATE_OPEN = 0, 1, 2, 3

    def __init__(self, waiting: object = None) -> None:
        self.state, self.socket_opened, self.last_ping = self.STATE_OPEN, 50.0, 100.0
        self.autoPingTimeoutCall = waiting


def test_a_cancelled_pong_deadline_is_no_longer_due():
    deadline = PongDeadline(130.0)
    assert deadline  # autobahn cancels its timer only `if self.autoPingTimeoutCall`
    assert deadline.due == 130.0
    deadline.cancel()
    assert deadline.due is None
    deadline.cancel()  # autobahn's ways may end a wait twice
    assert deadline.due is None


def test_a_sockets_next_deadline_is_its_pongs_when_that_comes_before_its_next_ping():
    assert next_deadline(Daphne, Protocol()) == 120.0
    assert next_deadline(Daphne, Protocol(PongDeadline(110.0))) == 110.0
    assert next_deadline(Daphne, Protocol(PongDeadline(130.0))) == 120.0


def test_a_pong_deadline_ended_or_kept_by_autobahns_timer_is_not_the_wheels():
    cancelled = PongDeadline(110.0)
    cancelled.cancel()
    assert next_deadline(Daphne, Protocol(cancelled)) == 120.0

    class Timer:  # what txaio's batched timer gives autobahn: it fires on its own
        due = 110.0

    assert next_deadline(Daphne, Protocol(Timer())) == 120.0


def test_a_closing_socket_is_still_held_to_its_pong_and_to_websocket_timeout():
    closing = Protocol(PongDeadline(110.0))
    closing.state = closing.STATE_CLOSING
    assert next_deadline(Daphne, closing) == 110.0
    closing.autoPingTimeoutCall = None
    assert next_deadline(Daphne, closing) is None

    class DaphneWithTimeout(Daphne):
        websocket_timeout = 30.0

    assert next_deadline(DaphneWithTimeout, closing) == 80.0
    assert next_deadline(DaphneWithTimeout, Protocol(PongDeadline(70.0))) == 70.0
