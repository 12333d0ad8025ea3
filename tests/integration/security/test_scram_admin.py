"""SCRAM users managed with Kafka's admin APIs (confluent-kafka), kept durably, never as
passwords; bootstrapped with --add-scram."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from onceflow.protocol.client import AuthenticationError, WireClient
from tests.integration.security.secured import ADMIN, client_config

TIMEOUT = 15


@pytest.fixture(scope="module")
def admin(secured_broker) -> AdminClient:
    return AdminClient(
        client_config(secured_broker, "SASL_PLAINTEXT", None, "SCRAM-SHA-256", ADMIN)
    )


def can_log_in(broker, mechanism: str, user: str, password: str) -> bool:
    conf = client_config(broker, "SASL_PLAINTEXT", None, mechanism, (user, password))
    try:
        WireClient.from_config(conf).close()
    except AuthenticationError:
        return False
    return True


def alter(admin: AdminClient, alterations: list) -> dict:
    futures = admin.alter_user_scram_credentials(alterations)
    outcome = {}
    for user, future in futures.items():
        try:
            future.result(TIMEOUT)
            outcome[user] = None
        except KafkaException as error:
            outcome[user] = error.args[0].code()
    return outcome


def test_bootstrapped_users_are_described(admin):
    futures = admin.describe_user_scram_credentials(["admin", "bob"])
    mechanisms = {
        user: sorted(
            (info.mechanism, info.iterations)
            for info in future.result(TIMEOUT).scram_credential_infos
        )
        for user, future in futures.items()
    }
    assert mechanisms == {
        "admin": [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)],
        "bob": [(ScramMechanism.SCRAM_SHA_512, 4096)],
    }


def test_upsert_log_in_change_password_delete(secured_broker, admin):
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    upsert = UserScramCredentialUpsertion("dave", sha256, b"dave-secret")
    assert alter(admin, [upsert]) == {"dave": None}
    assert can_log_in(secured_broker, "SCRAM-SHA-256", "dave", "dave-secret")
    assert not can_log_in(secured_broker, "SCRAM-SHA-512", "dave", "dave-secret")

    assert alter(admin, [UserScramCredentialUpsertion("dave", sha256, b"new-secret")]) == {
        "dave": None
    }
    assert not can_log_in(secured_broker, "SCRAM-SHA-256", "dave", "dave-secret")
    assert can_log_in(secured_broker, "SCRAM-SHA-256", "dave", "new-secret")

    deletion = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    assert alter(admin, [deletion]) == {"dave": None}
    assert not can_log_in(secured_broker, "SCRAM-SHA-256", "dave", "new-secret")


def test_unknown_users_answer_resource_not_found(admin):
    deletion = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    assert alter(admin, [deletion]) == {"nobody": KafkaError.RESOURCE_NOT_FOUND}
    with pytest.raises(KafkaException) as raised:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(TIMEOUT)
    assert raised.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_too_few_iterations_are_unacceptable(admin):
    weak = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000)
    upsert = UserScramCredentialUpsertion("erin", weak, b"erin-secret")
    assert alter(admin, [upsert]) == {"erin": KafkaError.UNACCEPTABLE_CREDENTIAL}


def test_credentials_are_durable_and_hold_no_password(secured_broker, admin):
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    assert alter(admin, [UserScramCredentialUpsertion("frank", info, b"frank-secret")]) == {
        "frank": None
    }
    stored = secured_broker.data_dir / "scram-credentials.json"
    assert b"frank-secret" not in stored.read_bytes()
    assert set(json.loads(stored.read_text())["frank"]) == {"SCRAM-SHA-512"}
    assert stored.stat().st_mode & 0o077 == 0
    secured_broker.restart(kill=True)
    assert can_log_in(secured_broker, "SCRAM-SHA-512", "frank", "frank-secret")
    # --add-scram at the restart left the stored credentials as they were.
    assert can_log_in(secured_broker, "SCRAM-SHA-256", *ADMIN)
