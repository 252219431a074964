"""The big room's report (bench/report.py): one column per room size, the posts'
ack latency beside the ack-to-last-delivery, from one run of `--big-room 1000,10000`."""

from __future__ import annotations

from bench.report import big_room_table, markdown


def room(members: int, lag_p99: float) -> dict:
    return {
        "sockets": members,
        "source_addresses": 1,
        "senders": 10,
        "per_second": 2.0,
        "posts": 200,
        "posts_reaching_all": 200,
        "msg_frames_per_s": members * 20.0,
        "post_ack_p50_ms": 4.0,
        "post_ack_p99_ms": 12.5,
        "post_round_trip_p50_ms": 3.0,
        "post_round_trip_p99_ms": 9.5,
        "posting_seconds": 10.2,
        "planned_seconds": 10.0,
        "ack_to_last_delivery_p50_ms": lag_p99 / 2,
        "ack_to_last_delivery_p99_ms": lag_p99,
        "ack_to_last_delivery_max_ms": lag_p99 + 1,
        "receipts_per_s": 500.0,
        "receipt_ack_p50_ms": 30.0,
        "receipt_ack_p99_ms": 90.0,
        "frames_per_receipt": 0.5,
        "client_cpu_cores": 0.4,
    }


def test_each_room_size_gets_a_column_side_by_side():
    lines = big_room_table([room(1000, 40.0), room(10000, 400.0)]).splitlines()
    assert lines[0] == "| big room | 1,000 members | 10,000 members |"
    assert "| post ack p50 / p99 ms, from when due | 4.0 / 12.5 | 4.0 / 12.5 |" in lines
    assert "| post ack p50 / p99 ms, from when sent | 3.0 / 9.5 | 3.0 / 9.5 |" in lines
    assert "| seconds of posting (planned) | 10.2 (10) | 10.2 (10) |" in lines
    assert "| ack to last delivery, p50 / p99 / max ms | 20.0 / 40.0 / 41.0 | 200.0 / 400.0 / 401.0 |" in lines


def test_a_report_of_one_big_room_only_still_reads():
    # An earlier run's JSON: "big_room" alone, no "big_rooms".
    report = {
        "median": {},
        "rounds": {},
        "latency_vs_load": {},
        "latency_rounds": {},
        "idle": None,
        "targets": {},
        "big_room": room(1000, 40.0),
    }
    assert "| big room | 1,000 members |" in markdown(report)


def test_the_servers_collections_and_loop_lag_are_added_up_over_both_processes():
    def server(full_ms: float, lag_p99: float) -> dict:
        return {
            "gc0": {"count": 300, "total_ms": 150.0, "longest_under_ms": 25.0},
            "gc1": {"count": 30, "total_ms": 30.0, "longest_under_ms": 10.0},
            "gc2": {"count": 2, "total_ms": full_ms, "longest_under_ms": 250.0},
            "lag": {"samples": 90, "p99_under_ms": lag_p99, "at_least_50ms": 4, "longest_under_ms": lag_p99},
            "cpu_seconds": 3.06,
        }

    big = {**room(1000, 40.0), "servers_loop": [server(200.0, 100.0), server(150.0, 250.0)]}
    lines = big_room_table([big, room(10000, 400.0)]).splitlines()
    assert (
        "| servers' full collections while posting: count / ms in all / longest under ms | 4 / 350.0 / 250.0 | - |"
        in lines
    )
    assert "| servers' young collections (generations 0, 1): count / ms in all | 660 / 360.0 | - |" in lines
    assert "| servers' loop lag samples: 50 ms or more / all; p99 under ms | 8 / 180; 250.0 | - |" in lines
    # 6.12 s of CPU over 20,000 frames/s for 10.2 s.
    assert "| servers' CPU while posting, us per `msg` frame | 30.0 | - |" in lines
