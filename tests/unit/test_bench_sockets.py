"""The sockets curve's pure parts (bench/spread.py, bench/curve.py, bench/options.py):
how N sockets are spread over generator processes and loopback source
addresses, what fits the box's descriptors and ports, the per-10k arithmetic,
the extrapolation, and the command line."""

from __future__ import annotations

import pytest

from bench.curve import extrapolate, extrapolated_step, fit_line, per_10k, step_costs
from bench.options import parse_args
from bench.spread import FD_RESERVE, Layout, layout, misfits, parse_counts, port_count, source_address


def test_steps_are_read_as_growing_positive_counts():
    assert parse_counts("10000,25000,50000,100000") == [10000, 25000, 50000, 100000]
    assert parse_counts("2000") == [2000]
    assert parse_counts("10_000, 25_000") == [10000, 25000]
    for wrong in ("", "0", "-5", "5000,2000", "2000,2000", "ten"):
        with pytest.raises(ValueError):
            parse_counts(wrong)


def test_the_port_range_says_how_many_sockets_one_source_address_carries():
    assert port_count("32768\t60999") == 28232
    assert port_count("1024 65535") == 64512


def test_source_addresses_start_above_the_servers_own_and_stay_in_the_loopback():
    assert [source_address(i) for i in range(3)] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert source_address(254) == "127.0.1.0"
    assert all(source_address(i).startswith("127.") for i in (0, 1000, 100_000))


def test_as_few_generators_and_addresses_as_fit_the_largest_step():
    plan = layout(100_000, per_generator=25_000, per_address=20_000)
    assert plan.generators == 4
    assert plan.addresses == tuple(source_address(i) for i in range(5))
    # Asked for more than needed: as asked.
    assert layout(5000, generators=2, addresses=2) == Layout(2, ("127.0.0.2", "127.0.0.3"))
    assert layout(10) == Layout(1, ("127.0.0.2",))


def test_the_descriptor_limit_and_the_port_range_cap_each_generator_and_address():
    plan = layout(100_000, per_generator=25_000, per_address=30_000, fd_limit=20_000, ports=28_232)
    assert plan.generators == 6  # 100,000 / (20,000 - the reserve), rounded up
    assert len(plan.addresses) == 4  # 100,000 / 28,232, rounded up
    with pytest.raises(ValueError):
        layout(1000, fd_limit=FD_RESERVE)


def test_every_socket_has_one_generator_and_the_shares_add_up_at_every_step():
    plan = layout(100_000, generators=3, addresses=4)
    for n in (1, 2, 2000, 5000, 99_999, 100_000):
        shares = [plan.share(n, g) for g in range(plan.generators)]
        assert sum(shares) == n
        assert max(shares) - min(shares) <= 1
        indices = sorted(plan.index_of(g, k) for g in range(plan.generators) for k in range(shares[g]))
        assert indices == list(range(n)), "each socket of the curve once: its own session, its own server"


def test_the_sockets_are_spread_evenly_over_the_source_addresses():
    plan = layout(5000, generators=2, addresses=2)
    assert plan.per_address(5000) == {"127.0.0.2": 2500, "127.0.0.3": 2500}
    assert plan.per_address(2001) == {"127.0.0.2": 1001, "127.0.0.3": 1000}
    # Each generator goes round every address, whatever the counts share.
    assert {plan.address_of(k) for k in range(4)} == {"127.0.0.2", "127.0.0.3"}
    plan = layout(100_000, generators=4, addresses=5)
    assert sum(plan.per_address(77_777).values()) == 77_777
    assert max(plan.per_address(100_000).values()) == 20_000


def test_a_step_past_the_descriptor_limit_or_the_ports_does_not_fit():
    plan = layout(100_000, generators=5, addresses=4)
    assert misfits(10_000, servers=1, layout=plan, fd_limit=20_000, ports=28_232) == []
    too_many = misfits(25_000, servers=1, layout=plan, fd_limit=20_000, ports=28_232)
    assert len(too_many) == 1 and too_many[0].startswith("file descriptors: each of 1 server process")
    assert misfits(25_000, servers=2, layout=plan, fd_limit=20_000, ports=28_232) == []
    few_ports = misfits(
        100_000, servers=8, layout=Layout(5, ("127.0.0.2", "127.0.0.3")), fd_limit=1_000_000, ports=28_232
    )
    assert few_ports == ["ephemeral ports: 50,000 sockets from one source address, the port range holds 28,232"]
    one_generator = misfits(
        30_000, servers=2, layout=Layout(1, ("127.0.0.2", "127.0.0.3")), fd_limit=20_000, ports=28_232
    )
    assert one_generator[0].startswith("file descriptors: each of 1 generator(s)")


def test_per_10k_scales_a_figure_to_ten_thousand_sockets():
    assert per_10k(50.0, 5000) == 100.0
    assert per_10k(0.3, 30_000) == pytest.approx(0.1)
    assert per_10k(1.0, 0) is None
    assert per_10k(None, 100) is None


BASELINE = {
    "server_rss_mb": 90.0,
    "server_cpu_cores": 0.01,
    "generators_rss_mb": 60.0,
    "generators_cpu_cores": 0.0,
    "postgresql_cpu_cores": 0.02,
    "redis_cpu_cores": 0.01,
}


def step(n: int, rss: float, cpu: float, gen_rss: float = 50.0, gen_cpu: float = 0.01) -> dict:
    return {
        "sockets": n,
        "server_rss_mb": rss,
        "server_cpu_cores": cpu,
        "generators_rss_mb": gen_rss,
        "generators_cpu_cores": gen_cpu,
        "postgresql_cpu_cores": 0.1,
        "redis_cpu_cores": 0.02,
    }


def test_a_steps_costs_per_10k_are_over_the_baseline_with_no_socket():
    costs = step_costs(step(5000, rss=190.0, cpu=0.51, gen_rss=80.0, gen_cpu=0.02), BASELINE)
    assert costs == {
        "server_rss_growth_mb": 100.0,
        "server_rss_mb_per_10k": 200.0,
        "server_cpu_cores_per_10k": 1.0,
        "generators_rss_mb_per_10k": 40.0,
        "generators_cpu_cores_per_10k": 0.04,
    }


def test_the_line_through_the_measured_steps_extrapolates_the_rest():
    assert fit_line([(0, 1.0), (10, 21.0), (20, 41.0)]) == pytest.approx((1.0, 2.0))
    assert fit_line([(10, 5.0)]) == (0.0, 0.5)  # one point: through the origin
    assert extrapolate([(0, 90.0), (10_000, 290.0), (25_000, 590.0)], 100_000) == pytest.approx(2090.0)
    with pytest.raises(ValueError):
        fit_line([])
    measured = [step(10_000, rss=290.0, cpu=0.11), step(20_000, rss=490.0, cpu=0.21)]
    guess = extrapolated_step(50_000, measured, BASELINE)
    assert guess["extrapolated"] is True
    assert guess["server_rss_mb"] == pytest.approx(1090.0)
    assert guess["server_rss_mb_per_10k"] == pytest.approx(200.0)
    assert guess["server_cpu_cores_per_10k"] == pytest.approx(0.1)


def test_the_command_line_reads_the_curves_steps_and_the_big_rooms_sizes():
    args = parse_args(
        [
            "--sockets",
            "2000,5000",
            "--source-addresses",
            "2",
            "--generators",
            "2",
            "--big-room",
            "1000,10000",
            "--processes",
            "2",
        ]
    )
    assert args.sockets == [2000, 5000]
    assert (args.source_addresses, args.generators, args.processes) == (2, 2, 2)
    assert args.big_room == [1000, 10000]
    assert parse_args(["--big-room-members", "10000"]).big_room == [10000]
    assert parse_args(["--big-room", "0"]).big_room == []
    defaults = parse_args([])
    assert defaults.sockets is None, "no curve unless asked: it takes minutes a step"
    assert defaults.big_room == [1000] and defaults.load_sockets == 16
    assert (defaults.open_rate, defaults.settle, defaults.idle_window) == (2000.0, 30.0, 60.0)


@pytest.mark.parametrize(
    "wrong",
    [
        ["--sockets", "5000,2000"],
        ["--sockets", "0"],
        ["--processes", "0"],
        ["--open-rate", "-1"],
        ["--generators", "-2"],
        ["--big-room", "10,5"],
    ],
)
def test_the_command_line_refuses_what_it_cannot_run(wrong, capsys):
    with pytest.raises(SystemExit):
        parse_args(wrong)
    assert "error" in capsys.readouterr().err


def test_the_report_marks_what_is_extrapolated_and_why_the_curve_stopped():
    from bench.sockets_report import markdown

    measured = [{**step(10_000, rss=290.0, cpu=0.6), "opened_per_s": 900.0, "open_at_end": 10_000}]
    for s in measured:
        s.update(step_costs(s, BASELINE))
    curve = {
        "server": "daphne",
        "processes": 1,
        "cpus": 2,
        "generators": 1,
        "source_addresses": ["127.0.0.2"],
        "options": {"open_rate": 2000.0, "settle": 30.0, "window": 60.0},
        "limits": {
            "fd_soft": 20000,
            "fd_hard": 20000,
            "fs.nr_open": "1048576",
            "fs.file-max": "2466093",
            "net.ipv4.ip_local_port_range": "32768 60999",
            "ports_per_source_address": 28232,
        },
        "baseline": BASELINE,
        "steps": measured,
        "stopped": {"at": 25_000, "before_opening": True, "reasons": ["file descriptors: ..."]},
        "extrapolated": [extrapolated_step(n, measured, BASELINE) for n in (25_000, 50_000)],
    }
    text = markdown(curve)
    assert "| 25,000 (extrapolated) | - |" in text and "| 50,000 (extrapolated) | - |" in text
    assert "Stopped at 25,000 sockets: file descriptors: ..." in text
    assert "not measurements" in text
    # 50,000 idle sockets on the line: 3 cores of servers' alone, on a box of 2.
    assert "At 50,000 sockets the line's idle CPU" in text and "more than the box's 2" in text
