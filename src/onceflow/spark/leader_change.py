"""Riding out a leader election, and a partition or cluster that is unavailable for a while.

On a cluster, a request for one partition can reach a broker that no longer leads it (or
does not know it yet, right after a topic is created): Kafka answers
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or a leader-epoch error, a dead leader's
connection fails, and the client refreshes its metadata. A partition whose only in-sync
replicas are on a stopped node has no leader at all until one comes back, and librdkafka
then says so in its own words: the AdminClient's ``list_offsets`` fails with ``_NOENT``
("Failed to query partition leaders: No leaders found") when none of the partitions asked
for has a leader, and ``get_watermark_offsets`` with ``_UNKNOWN_PARTITION``.

librdkafka rides these out inside produce and fetch (a fetch waits for the leader, a
record is retried until ``message.timeout.ms``), but not for one-shot requests such as
``get_watermark_offsets``, ``list_offsets``, ``list_topics``, ``init_transactions`` or
``commit_transaction``: those raise, and the connectors ask again here, with a growing
pause (0.1 s up to 1 s, as Kafka's ``retry.backoff.ms`` and ``retry.backoff.max.ms``),
until the answer comes or the connector's ``unavailableTimeoutMs`` passes (120 s by
default). After that, one ``KafkaUnavailableError`` says what stayed unavailable, for how
long, and which option waits longer. Kafka's own clients do the same: the Java
AdminClient and consumer retry such calls until ``default.api.timeout.ms``, the producer
a record until ``delivery.timeout.ms`` (120 s). A single onceflow broker never gives these
answers while it runs; when it is restarted, its clients see the same transport errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from onceflow.client_errors import MOVING_OR_TIMED_OUT, error_code

log = logging.getLogger(__name__)

T = TypeVar("T")

LEADER_CHANGE_ERRORS = MOVING_OR_TIMED_OUT | {KafkaError._ALL_BROKERS_DOWN}
# librdkafka's words for "this partition has no leader now" in one-shot requests: pass
# them as ``also`` where they cannot mean anything else (see the module's doc).
NO_LEADER_ERRORS = frozenset({KafkaError._NOENT, KafkaError._UNKNOWN_PARTITION})

UNAVAILABLE_OPTION = "unavailableTimeoutMs"
DEFAULT_UNAVAILABLE_TIMEOUT_MS = 120_000

RETRY_PAUSE_S = 0.1  # the first pause; it doubles up to MAX_RETRY_PAUSE_S
MAX_RETRY_PAUSE_S = 1.0
# One attempt's limit: a request bound to a leader that just died waits for it until
# its timeout, while the partition moves to another node (Kafka fences a silent broker
# after broker.session.timeout.ms, 9 s by default, then elects a new leader).
ATTEMPT_TIMEOUT_S = 10.0


class KafkaUnavailableError(KafkaException):
    """Partitions, a coordinator or the whole cluster stayed unavailable for longer than
    the connector's ``unavailableTimeoutMs``. ``args[0]`` is the last ``KafkaError``."""

    def __init__(self, message: str, error: Any = None) -> None:
        super().__init__(error if error is not None else KafkaError(KafkaError._TIMED_OUT))
        self.message = message

    def __str__(self) -> str:
        return self.message


def error_text(error: BaseException) -> str:
    """librdkafka's own words for ``error`` (its ``str()``), else the exception's."""
    if isinstance(error, KafkaException) and error.args:
        text = getattr(error.args[0], "str", None)
        if callable(text):
            return str(text())
    return str(error) or type(error).__name__


def is_leader_change(code: int | None, also: Iterable[int] = ()) -> bool:
    return code is not None and (code in LEADER_CHANGE_ERRORS or code in set(also))


def is_unavailable(error: BaseException, also: Iterable[int] = ()) -> bool:
    """``error`` says that a leader, a coordinator or the cluster cannot be reached now
    (asking again later may succeed), and it is not already the final verdict."""
    if isinstance(error, KafkaUnavailableError):
        return False
    if isinstance(error, TimeoutError):
        return True
    if not isinstance(error, KafkaException):
        return False
    if is_leader_change(error_code(error), also):
        return True
    kafka_error = error.args[0] if error.args else None
    retriable = getattr(kafka_error, "retriable", None)
    fatal = getattr(kafka_error, "fatal", None)
    return bool(callable(retriable) and retriable() and not (callable(fatal) and fatal()))


class Patience:
    """How long a connector still waits for something unavailable, and the pauses between
    its attempts. The time counts from the creation (or from the first failure after a
    success)."""

    def __init__(self, timeout_s: float, what: str) -> None:
        self.timeout_s = timeout_s
        self.what = what
        self.since: float | None = time.monotonic()
        self.pause = RETRY_PAUSE_S
        self.warned = False

    def failed(self, error: BaseException) -> None:
        """Note a failure; raise ``KafkaUnavailableError`` once the time is up, else pause."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now - self.since >= self.timeout_s:
            raise unavailable(self.what, now - self.since, self.timeout_s, error) from error
        if not self.warned:
            self.warned = True
            log.warning(
                "%s: %s; asking again for up to %.0f s ('%s')",
                self.what,
                error_text(error),
                self.timeout_s,
                UNAVAILABLE_OPTION,
            )
        else:
            log.info("%s: %s; asking again", self.what, error_text(error))
        time.sleep(min(self.pause, self.since + self.timeout_s - now))
        self.pause = min(MAX_RETRY_PAUSE_S, self.pause * 2)

    def succeeded(self) -> None:
        """The thing answered: the next failure starts a new wait."""
        if self.warned and self.since is not None:
            log.warning(
                "%s: available again after %.1f s", self.what, time.monotonic() - self.since
            )
        self.since = None
        self.pause = RETRY_PAUSE_S
        self.warned = False


def unavailable(
    what: str, waited_s: float, timeout_s: float, error: BaseException | None
) -> KafkaUnavailableError:
    """The one-line error of something that stayed unavailable past ``unavailableTimeoutMs``."""
    last = f" ({error_text(error)})" if error is not None else ""
    return KafkaUnavailableError(
        f"{what}: still unavailable after {waited_s:.0f} s{last}; onceflow waits up to "
        f"'{UNAVAILABLE_OPTION}' ({timeout_s * 1000:.0f} ms) for a partition's leader, a "
        "coordinator or the cluster to come back",
        error.args[0] if isinstance(error, KafkaException) and error.args else None,
    )


def while_leader_moves(
    call: Callable[[], T],
    timeout: float,
    what: str,
    also: Iterable[int] = (),
    refresh: Callable[[], object] | None = None,
) -> T:
    """``call()``, asked again while it fails because a leader, a coordinator or the
    cluster is unavailable (or with one of ``also``) for up to ``timeout`` seconds; then
    ``KafkaUnavailableError`` (a ``KafkaException`` carrying the last error).
    ``refresh()``, if given, runs before each new attempt (its own failure is ignored)."""
    retryable = frozenset(also)
    patience = Patience(timeout, what)
    while True:
        try:
            result = call()
        except (KafkaException, TimeoutError) as error:
            if not is_unavailable(error, retryable):
                raise
            patience.failed(error)
            if refresh is not None:
                try:
                    refresh()
                except (KafkaException, TimeoutError) as refresh_error:
                    log.info("%s: %s", what, error_text(refresh_error))
            continue
        patience.succeeded()
        return result


def watermarks(
    consumer: Any,
    topic: str,
    partition: int,
    attempt_s: float,
    timeout_s: float,
    what: str,
    also: Iterable[int] = NO_LEADER_ERRORS,
) -> tuple[int, int]:
    """The partition's (low, high) watermarks, asked again while its leader moves.

    librdkafka sends the request to the leader its metadata cache names and does not
    refresh that cache when the request times out: a consumer that learned the leader just
    before it died (a client made right after a node was SIGKILLed, before the cluster
    fenced it) sent every attempt to the dead node for minutes (seen on a 3-node Kafka:
    209 s of local timeouts, topic.metadata.refresh.interval.ms is 5 minutes). So before
    each new attempt the topic's metadata is asked for again; with it the next attempt
    found the new leader.
    """
    from confluent_kafka import TopicPartition

    low, high = while_leader_moves(
        lambda: consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=attempt_s, cached=False
        ),
        timeout_s,
        what,
        also=also,
        refresh=lambda: consumer.list_topics(topic, timeout=attempt_s),
    )
    return int(low), int(high)
