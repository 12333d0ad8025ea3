"""The delay before answering a failed authentication doubles with each failure from one
address within a minute, up to 5 s, without holding up other addresses; driven by a
clock the test moves."""

from __future__ import annotations

from onceflow.broker.security.sasl_server import (
    FAILURE_MEMORY_SECONDS,
    MAX_FAILURE_DELAY,
    FailureThrottle,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_each_failure_within_the_memory_doubles_the_delay_up_to_the_cap() -> None:
    clock = Clock()
    throttle = FailureThrottle(0.1, monotonic=clock)
    delays = []
    for _ in range(8):
        delays.append(throttle.delay_after_failure("10.0.0.1"))
        clock.now += FAILURE_MEMORY_SECONDS - 1  # each failure within a minute of the last
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, MAX_FAILURE_DELAY, MAX_FAILURE_DELAY]


def test_a_quiet_minute_starts_over_and_other_addresses_are_not_slowed() -> None:
    clock = Clock()
    throttle = FailureThrottle(0.1, monotonic=clock)
    assert [throttle.delay_after_failure("10.0.0.1") for _ in range(3)] == [0.1, 0.2, 0.4]
    assert throttle.delay_after_failure("10.0.0.2") == 0.1
    clock.now += FAILURE_MEMORY_SECONDS
    assert throttle.delay_after_failure("10.0.0.1") == 0.1


def test_no_base_delay_means_no_delay() -> None:
    throttle = FailureThrottle(0.0, monotonic=Clock())
    assert [throttle.delay_after_failure("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.0]
