"""Several hosts under faults: `make bench-faults`'s deployment and steady load (bench/faults.py,
imported, not copied) at small sizes and short leases. Two web hosts behind the clients'
round-robin, two worker hosts, beat on one, the bench's own PostgreSQL and Redis; through each
fault in turn (a web host killed, a worker host killed, PostgreSQL restarted, the broker restarted,
a worker host stopped past its lease then continued, beat on both worker hosts), every call
completes, and its side effect happens exactly once (docs/guarantees.md, "Several hosts under
faults"). How long each took is the benchmark's to measure, not asserted here."""

from __future__ import annotations

import pytest

from bench import faults

SMALL = faults.Options(
    clients=3,
    seconds=0.3,
    concurrency=2,
    web_workers=1,  # each process that starts costs the 2-core machine seconds; the bench keeps 2
    restart_after=0.2,
    warmup=0.5,
    settle=0.2,
    database="hitl_hosts_under_faults",
    env={
        "RUN_LEASE_SECONDS": "3",
        "STALLED_CHECK_SECONDS": "1",
        "RUN_STALLED_AFTER_SECONDS": "5",
        "MCP_RUN_WAIT_SECONDS": "5",
    },
)


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_on_several_hosts_every_call_completes_and_acts_exactly_once_through_each_fault(broker):
    if broker == "rabbitmq" and not faults.rabbitmq_up():
        pytest.fail(f"RabbitMQ is not running at {faults.RABBITMQ} (make test starts it: see the Makefile's services)")

    report = faults.run_broker(broker, SMALL)
    print(faults.markdown([report]), f"startup {report['startup_seconds']} s, in all {report['total_seconds']} s")
    for phase in report["phases"]:  # when each copy of an effect made more than once was made
        if phase["effects_made_more_than_once"]:
            print(phase["fault"], phase["fault_seconds"], phase["effects_made_more_than_once"])

    assert [phase["fault"] for phase in report["phases"]] == list(faults.FAULTS)
    for phase in report["phases"]:
        # The fault met calls going (the load was steady through it) ...
        assert phase["calls_in_flight_during_fault"] > 0, phase
        # ... and every call, those it met and those started after, completed, each effect once: a
        # second effect counts unless its first copy was already under way (the lease found held)
        # when its worker host was stopped, or was made so shortly before its worker was cut off
        # from PostgreSQL (its host killed or stopped, PostgreSQL restarting) that its step's
        # checkpoint could not be written, which no fence can undo (docs/guarantees.md).
        assert phase["calls_in_flight_completed"] == phase["calls_in_flight_during_fault"], phase
        assert phase["calls_completed"] == phase["calls_started"], phase
        assert phase["effects_twice"] == 0, phase
        assert phase["effects_missing"] == 0, phase
