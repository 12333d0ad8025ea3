"""ACLs with confluent-kafka's AdminClient, enforced with Kafka's error codes.

One broker with the StandardAuthorizer, ``super.users=User:admin`` and no
``allow.everyone.if.no.acl.found``. Clients authenticate with SCRAM over SASL_PLAINTEXT
(alice and bob) or with a client certificate over SSL (the mTLS principal).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from onceflow.broker.process import BrokerProcess
from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import request_class
from onceflow.protocol.errors import ErrorCode
from tests.integration.security.secured import (
    ADMIN,
    ALICE,
    BOB,
    PLAIN_USERS,
    TlsFiles,
    allow,
    client_config,
    create_acls,
    start_authorizing_broker,
)
from tests.kit.clients import create_topic

TIMEOUT = 15
CAROL = ("carol", PLAIN_USERS["carol"])
ALICE_PRINCIPAL = "User:alice"
BOB_PRINCIPAL = "User:bob"


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls_files) -> Iterator[BrokerProcess]:
    process = start_authorizing_broker(tmp_path_factory.mktemp("acls"), tls_files)
    yield process
    process.stop()


def as_user(broker: BrokerProcess, user: tuple[str, str], **extra) -> dict:
    return {
        **client_config(broker, "SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", user=user),
        **extra,
    }


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return AdminClient(as_user(broker, ADMIN))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acl_filter(
    resource: ResourceType,
    name: str | None,
    pattern: ResourcePatternType,
    principal: str | None = None,
    permission: AclPermissionType = AclPermissionType.ANY,
) -> AclBindingFilter:
    """A filter for the ACLs on ``name`` of any host and operation."""
    return AclBindingFilter(resource, name, pattern, principal, None, AclOperation.ANY, permission)


def create_admin_topic(broker: BrokerProcess, name: str) -> None:
    """A topic created by the admin user (the kit's create_topic, with its credentials)."""
    create_topic(broker.bootstrap_for("SASL_PLAINTEXT"), name, client=as_user(broker, ADMIN))


def produce_one(config: dict, topic: str) -> KafkaError | None:
    """Produce one record; the delivery (or fatal) error, None when it was written."""
    errors = []
    producer = Producer({"message.timeout.ms": 5000, **config})
    producer.produce(topic, b"value", on_delivery=lambda error, _msg: errors.append(error))
    try:
        producer.flush(TIMEOUT)
    except (KafkaException, SystemError) as raised:  # a fatal error comes out of flush
        fatal = raised if isinstance(raised, KafkaException) else raised.__context__
        if not isinstance(fatal, KafkaException):
            raise
        # The client keeps this error where gc cannot see it; with its traceback it would
        # keep this frame, the caller's and their clients (the module's admin) alive and
        # connecting to this broker's port long after the broker stopped.
        raised.__traceback__ = fatal.__traceback__ = None
        return fatal.args[0]
    finally:
        producer.close()
    return errors[0]


def high_watermark(admin_config: dict, topic: str) -> int:
    consumer = Consumer({**admin_config, "group.id": unique("watermark")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]
    finally:
        consumer.close()


def consume_error(config: dict, topic: str) -> KafkaError | None:
    """The first error a consumer assigned to the topic reports (None if it read a record)."""
    consumer = Consumer({**config, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            return message.error()
        raise AssertionError("neither a record nor an error")
    finally:
        consumer.close()


def test_create_describe_delete_acls(admin):
    topic = unique("acl-admin")
    bindings = [
        allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ),
        allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.WRITE, host="10.1.2.3"),
        allow(
            BOB_PRINCIPAL,
            ResourceType.TOPIC,
            topic[:-3],
            AclOperation.ALL,
            pattern=ResourcePatternType.PREFIXED,
        ),
        allow(
            BOB_PRINCIPAL,
            ResourceType.GROUP,
            topic,
            AclOperation.READ,
            permission=AclPermissionType.DENY,
        ),
    ]
    create_acls(admin, bindings)

    literal = acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL)
    assert sorted(map(str, admin.describe_acls(literal).result(TIMEOUT))) == sorted(
        map(str, bindings[:2])
    )
    match = acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH)
    assert sorted(map(str, admin.describe_acls(match).result(TIMEOUT))) == sorted(
        map(str, bindings[:3])
    )
    by_principal = acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, BOB_PRINCIPAL)
    bob_acls = admin.describe_acls(by_principal).result(TIMEOUT)
    assert {str(b) for b in bindings[2:]} <= {str(b) for b in bob_acls}

    deny_filter = acl_filter(
        ResourceType.GROUP, topic, ResourcePatternType.ANY, permission=AclPermissionType.DENY
    )
    deleted = admin.delete_acls([literal, deny_filter])
    results = [future.result(TIMEOUT) for future in deleted.values()]
    assert sorted(map(str, results[0])) == sorted(map(str, bindings[:2]))
    assert list(map(str, results[1])) == [str(bindings[3])]
    assert admin.describe_acls(literal).result(TIMEOUT) == []


def test_invalid_acl_is_refused_with_invalid_request(admin):
    binding = AclBinding(
        ResourceType.BROKER,
        "not-the-cluster",
        ResourcePatternType.LITERAL,
        ALICE_PRINCIPAL,
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as raised:
        create_acls(admin, [binding])
    assert raised.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_acl_apis_need_cluster_alter_and_describe(broker):
    alice = AdminClient(as_user(broker, ALICE))
    with pytest.raises(KafkaException) as raised:
        create_acls(alice, [allow(ALICE_PRINCIPAL, ResourceType.TOPIC, "x", AclOperation.ALL)])
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error, so ask on the wire (as anonymous).
    with WireClient(broker.bootstrap_for("PLAINTEXT")) as wire:
        response = wire.request(
            request_class(29, 3),
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert response.resources == ()


def test_produce_needs_write_and_nothing_is_appended_without_it(broker, admin):
    topic = unique("acl-write")
    create_admin_topic(broker, topic)
    create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ)])
    error = produce_one(as_user(broker, ALICE, **{"enable.idempotence": False}), topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert high_watermark(as_user(broker, ADMIN), topic) == 0

    create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.WRITE)])
    assert produce_one(as_user(broker, ALICE, **{"enable.idempotence": True}), topic) is None
    assert high_watermark(as_user(broker, ADMIN), topic) == 1


def test_idempotent_producer_needs_write_on_some_topic(broker, admin):
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE
    on some topic; carol (PLAIN) has no ACL at all."""
    topic = unique("acl-idempotent")
    create_admin_topic(broker, topic)
    create_acls(admin, [allow("User:carol", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)])
    carol = client_config(broker, "SASL_PLAINTEXT", mechanism="PLAIN", user=CAROL)
    error = produce_one({**carol, "enable.idempotence": True}, topic)
    assert error is not None and error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert high_watermark(as_user(broker, ADMIN), topic) == 0


def test_consume_needs_read_and_commit_needs_group_read(broker, admin):
    topic = unique("acl-read")
    group = unique("acl-group")
    create_admin_topic(broker, topic)
    assert produce_one(as_user(broker, ADMIN), topic) is None
    # DESCRIBE lets alice see the topic and find the group's coordinator, not fetch or
    # commit (both need READ).
    create_acls(
        admin,
        [
            allow(ALICE_PRINCIPAL, ResourceType.GROUP, group, AclOperation.DESCRIBE),
            allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        ],
    )

    error = consume_error(as_user(broker, ALICE, **{"group.id": group}), topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ)])
    assert consume_error(as_user(broker, ALICE, **{"group.id": group}), topic) is None

    consumer = Consumer(as_user(broker, ALICE, **{"group.id": group, "enable.auto.commit": False}))
    try:
        with pytest.raises(KafkaException) as raised:
            consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.GROUP, group, AclOperation.READ)])
        committed = consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert [tp.error for tp in committed] == [None]
    finally:
        consumer.close()
    admin_client = AdminClient(as_user(broker, ADMIN))  # referenced while its futures run
    committed = admin_client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    offsets = committed[group].result(TIMEOUT).topic_partitions
    assert [(tp.topic, tp.offset) for tp in offsets] == [(topic, 1)]


def test_subscribe_without_group_read_fails(broker, admin):
    topic = unique("acl-subscribe")
    create_admin_topic(broker, topic)
    create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ)])
    consumer = Consumer(as_user(broker, ALICE, **{"group.id": unique("nogroup")}))
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT
        error = None
        while error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                error = message.error()
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_transactions_need_write_on_the_transactional_id(broker, admin):
    topic = unique("acl-txn")
    txn_id = unique("txn")
    group = unique("txn-group")
    create_admin_topic(broker, topic)
    create_acls(
        admin,
        [
            allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.WRITE),
            allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ),
        ],
    )
    producer = Producer(as_user(broker, ALICE, **{"transactional.id": txn_id}))
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(TIMEOUT)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    create_acls(
        admin, [allow(ALICE_PRINCIPAL, ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE)]
    )
    producer = Producer(as_user(broker, ALICE, **{"transactional.id": txn_id}))
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn")
    metadata = Consumer(as_user(broker, ALICE, **{"group.id": group})).consumer_group_metadata()
    with pytest.raises(KafkaException) as raised:  # sending offsets needs READ on the group
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 0)], metadata, TIMEOUT)
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    producer.abort_transaction(TIMEOUT)

    create_acls(admin, [allow(ALICE_PRINCIPAL, ResourceType.GROUP, group, AclOperation.READ)])
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 0)], metadata, TIMEOUT)
    producer.commit_transaction(TIMEOUT)
    producer.close()


def test_metadata_lists_only_describable_topics(broker, admin):
    visible, hidden = unique("acl-visible"), unique("acl-hidden")
    create_admin_topic(broker, visible)
    create_admin_topic(broker, hidden)
    create_acls(admin, [allow(BOB_PRINCIPAL, ResourceType.TOPIC, visible, AclOperation.DESCRIBE)])
    bob = AdminClient(as_user(broker, BOB))
    topics = bob.list_topics(timeout=TIMEOUT).topics
    assert visible in topics and hidden not in topics
    named = bob.list_topics(hidden, timeout=TIMEOUT).topics[hidden]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in AdminClient(as_user(broker, ADMIN)).list_topics(timeout=TIMEOUT).topics


def test_deny_beats_allow_and_prefixed_acls_apply(broker, admin):
    prefix = unique("acl-deny")
    topic = f"{prefix}-orders"
    create_admin_topic(broker, topic)
    create_acls(
        admin,
        [
            allow(
                "User:*",
                ResourceType.TOPIC,
                prefix,
                AclOperation.ALL,
                pattern=ResourcePatternType.PREFIXED,
            ),
            allow(
                BOB_PRINCIPAL,
                ResourceType.TOPIC,
                topic,
                AclOperation.WRITE,
                permission=AclPermissionType.DENY,
            ),
        ],
    )
    assert produce_one(as_user(broker, ALICE, **{"enable.idempotence": False}), topic) is None
    error = produce_one(as_user(broker, BOB, **{"enable.idempotence": False}), topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert high_watermark(as_user(broker, ADMIN), topic) == 1


def test_super_user_needs_no_acl(broker, admin):
    topic = unique("acl-super")
    create_admin_topic(broker, topic)
    assert produce_one(as_user(broker, ADMIN, **{"enable.idempotence": True}), topic) is None
    assert consume_error(as_user(broker, ADMIN, **{"group.id": unique("g")}), topic) is None


def test_mtls_principal_is_the_certificate_subject(broker, admin, tls_files: TlsFiles):
    topic = unique("acl-mtls")
    create_admin_topic(broker, topic)
    config = client_config(broker, "SSL", tls_files, client_certificate=True)
    error = produce_one({**config, "enable.idempotence": False}, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(
        admin, [allow(tls_files.client_principal, ResourceType.TOPIC, topic, AclOperation.WRITE)]
    )
    assert produce_one({**config, "enable.idempotence": False}, topic) is None
    anonymous = client_config(broker, "SSL", tls_files)  # no certificate: User:ANONYMOUS
    error = produce_one({**anonymous, "enable.idempotence": False}, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_survive_a_restart(broker, admin):
    topic = unique("acl-durable")
    binding = allow(ALICE_PRINCIPAL, ResourceType.TOPIC, topic, AclOperation.READ)
    create_acls(admin, [binding])
    broker.restart(kill=True)
    fresh = AdminClient(as_user(broker, ADMIN))
    literal = acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL)
    assert list(map(str, fresh.describe_acls(literal).result(TIMEOUT))) == [str(binding)]
