"""A SASL_SSL listener beside each node's PLAINTEXT one, with ACLs: a secured Apache
Kafka cluster for tests of clients that must authenticate.

    secured = SecuredListener(keystore=Path("server.pem"), key_password="secret",
                              truststore=Path("ca.pem"),
                              scram_users=(("SCRAM-SHA-512", "admin", "admin-secret"),))
    with KafkaCluster(3, secured=secured) as cluster:
        bootstrap = cluster.bootstrap_for("SASL_SSL")

TLS from PEM files (``ssl.keystore.type=PEM``: the private key, PKCS#8, then the
certificate chain; the CA as the truststore); SCRAM users stored when the nodes' storage
is formatted (``kafka-storage format --add-scram``); the StandardAuthorizer with
``super.users`` (the brokers' own PLAINTEXT traffic runs as ``User:ANONYMOUS``, which is a
super user too, so the cluster works; clients of the secured listener get what ACLs
allow).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LISTENER = "SASL_SSL"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class SecuredListener:
    keystore: Path
    truststore: Path
    scram_users: tuple[tuple[str, str, str], ...]  # (mechanism, name, password)
    key_password: str | None = None
    super_users: tuple[str, ...] = ("User:admin",)
    authorizer: bool = True

    @property
    def mechanisms(self) -> list[str]:
        return sorted({mechanism for mechanism, _, _ in self.scram_users})

    def properties(self) -> dict[str, str]:
        """The broker settings of the listener (its address is the cluster's to set)."""
        prefix = f"listener.name.{LISTENER.lower()}"
        settings = {
            f"{prefix}.sasl.enabled.mechanisms": ",".join(self.mechanisms),
            **{f"{prefix}.{m.lower()}.sasl.jaas.config": SCRAM_LOGIN for m in self.mechanisms},
            f"{prefix}.ssl.keystore.type": "PEM",
            f"{prefix}.ssl.keystore.location": str(self.keystore),
            f"{prefix}.ssl.truststore.type": "PEM",
            f"{prefix}.ssl.truststore.location": str(self.truststore),
        }
        if self.key_password is not None:
            settings[f"{prefix}.ssl.key.password"] = self.key_password
        if self.authorizer:
            settings["authorizer.class.name"] = AUTHORIZER
            settings["super.users"] = ";".join(("User:ANONYMOUS", *self.super_users))
        return settings

    def format_args(self) -> list[str]:
        """``kafka-storage format`` arguments storing the SCRAM users."""
        args = []
        for mechanism, name, password in self.scram_users:
            args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        return args
