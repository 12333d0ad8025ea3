"""A broker with every listener type, its certificates and users, client settings, ACLs.

Certificates are made fresh by ``trustme`` in a temporary directory for each test
session; no key is ever committed. The server's private key is encrypted, so
``ssl.key.password`` is exercised on every run.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives import serialization

from onceflow.broker.process import BrokerProcess

KEY_PASSWORD = "keystore-secret"
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")  # SCRAM-SHA-256 and SCRAM-SHA-512
BOB = ("bob", "bob-secret")  # SCRAM-SHA-512 only
PLAIN_USERS = {"carol": "carol-secret", "admin": "admin-secret"}
SCRAM_USERS = [
    ("SCRAM-SHA-256", *ADMIN),
    ("SCRAM-SHA-512", *ADMIN),
    ("SCRAM-SHA-256", *ALICE),
    ("SCRAM-SHA-512", *ALICE),
    ("SCRAM-SHA-512", *BOB),
]
LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # trusted by clients and (for client certificates) by the broker
    server_keystore: Path  # encrypted key + certificate chain, PEM
    client_certificate: Path  # CN=alice
    client_key: Path
    expired_certificate: Path  # CN=alice, expired yesterday
    expired_key: Path
    untrusted_certificate: Path  # CN=mallory, from a CA nobody trusts
    untrusted_key: Path
    untrusted_ca: Path

    client_principal = "User:CN=alice,OU=clients,O=onceflow-tests"


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="onceflow-tests")
    other_ca = trustme.CA(organization_name="someone-else")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other_ca.cert_pem.write_to_path(str(directory / "other-ca.pem"))

    server = ca.issue_cert("localhost", "127.0.0.1", common_name="broker")
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    chain = b"".join(blob.bytes() for blob in server.cert_chain_pems)
    (directory / "server.pem").write_bytes(encrypted + chain)

    def client(name: str, issuer: trustme.CA, **dates: datetime.datetime) -> tuple[Path, Path]:
        leaf = issuer.issue_cert(
            f"{name}.clients.example",
            common_name=name.split("-")[0],
            organization_name="onceflow-tests",
            organization_unit_name="clients",
            **dates,
        )
        certificate, key_path = directory / f"{name}.pem", directory / f"{name}.key"
        certificate.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        key_path.write_bytes(leaf.private_key_pem.bytes())
        return certificate, key_path

    now = datetime.datetime.now(datetime.UTC)
    alice = client("alice", ca)
    expired = client(
        "alice-expired",
        ca,
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    mallory = client("mallory", other_ca)
    return TlsFiles(
        ca=directory / "ca.pem",
        server_keystore=directory / "server.pem",
        client_certificate=alice[0],
        client_key=alice[1],
        expired_certificate=expired[0],
        expired_key=expired[1],
        untrusted_certificate=mallory[0],
        untrusted_key=mallory[1],
        untrusted_ca=directory / "other-ca.pem",
    )


def broker_config(tls: TlsFiles, directory: Path, **extra: str) -> dict[str, str]:
    users_file = directory / "plain-users.properties"
    users_file.write_text("".join(f"{name}={password}\n" for name, password in PLAIN_USERS.items()))
    return {
        "listeners": LISTENERS,
        "ssl.keystore.location": str(tls.server_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.location": str(tls.ca),
        "ssl.client.auth": "requested",
        "sasl.plain.users.file": str(users_file),
        **extra,
    }


def add_scram_args() -> list[str]:
    args = []
    for mechanism, name, password in SCRAM_USERS:
        args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    return args


def start_secured_broker(directory: Path, tls: TlsFiles, **extra: str) -> BrokerProcess:
    directory.mkdir(parents=True, exist_ok=True)
    return BrokerProcess(
        directory / "data", config=broker_config(tls, directory, **extra), args=add_scram_args()
    ).start()


def start_authorizing_broker(directory: Path, tls: TlsFiles) -> BrokerProcess:
    """A secured broker with the StandardAuthorizer and ``super.users=User:admin`` (no
    ``allow.everyone.if.no.acl.found``): every other principal needs ACLs."""
    return start_secured_broker(
        directory, tls, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}
    )


def allow(
    principal: str, resource: ResourceType, name: str, operation: AclOperation, **kw
) -> AclBinding:
    """An ACL binding; ``pattern``, ``host`` and ``permission`` default to LITERAL, * and
    ALLOW."""
    return AclBinding(
        resource,
        name,
        kw.get("pattern", ResourcePatternType.LITERAL),
        principal,
        kw.get("host", "*"),
        operation,
        kw.get("permission", AclPermissionType.ALLOW),
    )


def create_acls(admin: AdminClient, bindings: list[AclBinding], timeout: float = 15) -> None:
    for future in admin.create_acls(bindings).values():
        future.result(timeout)


def client_config(
    broker: BrokerProcess,
    listener: str,
    tls: TlsFiles | None = None,
    mechanism: str | None = None,
    user: tuple[str, str] | None = None,
    client_certificate: bool = False,
) -> dict[str, str]:
    """librdkafka / Kafka-style settings for ``listener``."""
    config = {"bootstrap.servers": broker.bootstrap_for(listener), "security.protocol": listener}
    if "SSL" in listener:
        assert tls is not None
        config["ssl.ca.location"] = str(tls.ca)
        if client_certificate:
            config["ssl.certificate.location"] = str(tls.client_certificate)
            config["ssl.key.location"] = str(tls.client_key)
    if "SASL" in listener:
        assert mechanism is not None and user is not None
        config["sasl.mechanism"] = mechanism
        config["sasl.username"], config["sasl.password"] = user
    return config
