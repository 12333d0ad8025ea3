"""The CLI against a broker with TLS and SASL listeners and the StandardAuthorizer.

Exit 3 with Kafka's error code and the principal for what a principal may not do or
see, an empty listing for a principal that sees nothing is exit 3 too, authentication
and protocol mismatches say what is wrong (exit 2), and ``onceflow acls`` manages ACLs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from click.testing import CliRunner

from onceflow.broker.process import BrokerProcess
from onceflow.cli import main
from onceflow.testing import unique_name
from tests.integration.security.secured import (
    ADMIN,
    ALICE,
    client_config,
    start_authorizing_broker,
)
from tests.kit.clients import new_topic


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls_files) -> Iterator[BrokerProcess]:
    process = start_authorizing_broker(tmp_path_factory.mktemp("cli-acls"), tls_files)
    yield process
    process.stop()


def properties(directory: Path, name: str, conf: dict[str, str]) -> str:
    path = directory / f"{name}.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return str(path)


@pytest.fixture(scope="module")
def configs(broker, tmp_path_factory) -> dict[str, str]:
    """--command-config files: admin (a super user), alice (no ACLs yet), anonymous."""
    directory = tmp_path_factory.mktemp("client-configs")
    sasl = {"listener": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-512"}
    return {
        "admin": properties(directory, "admin", client_config(broker, **sasl, user=ADMIN)),
        "alice": properties(directory, "alice", client_config(broker, **sasl, user=ALICE)),
        "anonymous": properties(directory, "anonymous", client_config(broker, "PLAINTEXT")),
    }


def invoke(who: str, configs: dict[str, str], *args: str):
    return CliRunner().invoke(main, [*args, "--command-config", configs[who]])


def secret_topic(broker: BrokerProcess) -> str:
    """A topic of its own, created by the admin user."""
    admin = client_config(broker, "SASL_PLAINTEXT", None, "SCRAM-SHA-512", ADMIN)
    return new_topic(broker.bootstrap_for("SASL_PLAINTEXT"), "secret", client=admin)


# ----------------------------------------------------------------- not authorized


def test_a_topic_the_principal_may_not_describe_is_not_authorized_not_missing(broker, configs):
    topic = secret_topic(broker)
    for command in (
        ["topics", "describe", topic],
        ["transactions", "producers", topic],
        ["transactions", "find-hanging", "--topic", topic],
    ):
        result = invoke("alice", configs, *command)
        assert result.exit_code == 3, (command, result.stderr)
        assert result.stdout == ""
        assert result.stderr == (
            f"error: describe topic {topic}: not authorized "
            "(TOPIC_AUTHORIZATION_FAILED, principal User:alice)\n"
        ), command


def test_a_group_the_principal_may_not_describe_is_exit_3(broker, configs):
    for command in (["groups", "offsets", "g1"], ["groups", "describe", "g1"]):
        result = invoke("alice", configs, *command)
        assert result.exit_code == 3, (command, result.stderr)
        assert result.stderr == (
            "error: describe group g1: not authorized "
            "(GROUP_AUTHORIZATION_FAILED, principal User:alice)\n"
        )


def test_the_principal_of_a_client_certificate_is_named(broker, tls_files, tmp_path):
    conf = client_config(broker, "SSL", tls_files, client_certificate=True)
    result = CliRunner().invoke(
        main, ["groups", "offsets", "g1", "--command-config", properties(tmp_path, "mtls", conf)]
    )
    assert result.exit_code == 3, result.stderr
    assert result.stderr == (
        "error: describe group g1: not authorized (GROUP_AUTHORIZATION_FAILED, "
        f"principal {tls_files.client_principal})\n"
    )


def test_verify_of_a_topic_the_principal_may_not_read_is_exit_3(broker, configs):
    topic = secret_topic(broker)
    result = invoke(
        "alice", configs, "verify", "--input", topic, "--output-topic", topic, "--id-field", "id"
    )
    assert result.exit_code == 3, result.stderr
    assert result.stderr == (
        f"error: topic '{topic}': not authorized "
        "(TOPIC_AUTHORIZATION_FAILED, principal User:alice)\n"
    )


def test_anonymous_on_a_plaintext_listener_is_told_it_sees_nothing(broker, configs):
    secret_topic(broker)  # there is something to see, for a principal allowed to
    for command, what in (
        (["topics", "list"], "list topics"),
        (["groups", "list"], "list groups"),
        (["transactions", "list"], "list transactions"),
    ):
        result = invoke("anonymous", configs, *command)
        assert result.exit_code == 3, (command, result.stdout, result.stderr)
        assert result.stdout == ""
        assert result.stderr.startswith(
            f"error: {what}: nothing is visible to principal User:ANONYMOUS: it may not "
            "describe the cluster"
        ), result.stderr
    assert invoke("admin", configs, "topics", "list").exit_code == 0
    acls = invoke("anonymous", configs, "acls", "list")
    assert (acls.exit_code, acls.stdout) == (3, "")
    assert acls.stderr == (
        "error: describe ACLs: not authorized "
        "(CLUSTER_AUTHORIZATION_FAILED, principal User:ANONYMOUS)\n"
    )


# ------------------------------------------------------ authentication and protocols


def test_a_wrong_sasl_password_says_authentication_failed(broker, tmp_path):
    conf = client_config(broker, "SASL_PLAINTEXT", None, "SCRAM-SHA-512", ("alice", "wrong"))
    result = CliRunner().invoke(
        main, ["groups", "list", "--command-config", properties(tmp_path, "bad", conf)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: authentication failed at {broker.bootstrap_for('SASL_PLAINTEXT')}: "
        "SASL authentication error: Authentication failed"
    ), result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("listener", "expected"),
    [
        ("SSL", "the listener expects TLS: set security.protocol=SSL (or SASL_SSL)"),
        ("SASL_SSL", "the listener expects TLS: set security.protocol=SSL (or SASL_SSL)"),
        ("SASL_PLAINTEXT", "the listener expects SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ],
)
def test_a_plaintext_client_is_told_what_the_listener_expects(broker, listener, expected):
    address = broker.bootstrap_for(listener)
    result = CliRunner().invoke(main, ["topics", "list", "--bootstrap", address])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: cannot connect to {address}: {expected}")
    assert "every broker is down" not in result.stderr


# ------------------------------------------------------------------------ acls


def test_acls_create_list_delete_and_they_take_effect(broker, configs):
    topic = secret_topic(broker)
    group = unique_name("g")
    assert invoke("alice", configs, "topics", "describe", topic).exit_code == 3
    created = invoke(
        "admin", configs, "acls", "create", "--allow-principal", "User:alice",
        "--operation", "Describe", "--operation", "DescribeConfigs", "--topic", topic,
        "--group", group, "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    assert len(json.loads(created.stdout)) == 4
    denied = invoke(
        "admin", configs, "acls", "create", "--deny-principal", "User:bob",
        "--operation", "All", "--topic", topic[:8], "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert denied.exit_code == 0, denied.stderr
    on_topic = invoke("admin", configs, "acls", "list", "--topic", topic, "--json")
    assert {
        (a["principal"], a["operation"], a["permission"]) for a in json.loads(on_topic.stdout)
    } == {
        ("User:alice", "Describe", "Allow"),
        ("User:alice", "DescribeConfigs", "Allow"),
    }
    matching = invoke(
        "admin", configs, "acls", "list", "--topic", topic, "--resource-pattern-type", "match",
        "--json",
    )  # fmt: skip
    assert ("User:bob", "All", "Deny", "prefixed") in {
        (a["principal"], a["operation"], a["permission"], a["pattern_type"])
        for a in json.loads(matching.stdout)
    }
    described = invoke("alice", configs, "topics", "describe", topic)
    assert described.exit_code == 0, described.stderr
    removed = invoke(
        "admin", configs, "acls", "delete", "--topic", topic, "--allow-principal", "User:alice",
        "--operation", "Describe", "--force", "--json",
    )  # fmt: skip
    assert removed.exit_code == 0, removed.stderr
    assert [(a["resource_name"], a["operation"]) for a in json.loads(removed.stdout)] == [
        (topic, "Describe")
    ]
    assert invoke("alice", configs, "topics", "describe", topic).exit_code == 3
    rest = invoke("admin", configs, "acls", "delete", "--topic", topic, "--group", group, "--force")
    assert rest.exit_code == 0 and "deleted 3 ACL(s)" in rest.stdout
    nothing = invoke("admin", configs, "acls", "delete", "--topic", topic, "--force")
    assert (nothing.exit_code, nothing.stdout) == (0, "no ACL matched; nothing deleted\n")


def test_acls_by_a_principal_without_cluster_alter_is_exit_3(broker, configs):
    result = invoke(
        "alice", configs, "acls", "create", "--allow-principal", "User:alice",
        "--operation", "All", "--cluster",
    )  # fmt: skip
    assert result.exit_code == 3, result.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED, principal User:alice" in result.stderr


def test_acls_usage_errors(broker, configs):
    for args, message in (
        (["create", "--allow-principal", "User:a", "--operation", "Read"], "give a resource"),
        (["create", "--topic", "t", "--operation", "Read"], "give --allow-principal"),
        (["create", "--topic", "t", "--allow-principal", "alice", "--operation", "Read"],
         "expected TYPE:NAME such as User:alice"),
        (["create", "--topic", "t", "--allow-principal", "User:a", "--operation", "Bogus"],
         "unknown operation 'Bogus'"),
        (["create", "--topic", "t", "--allow-principal", "User:a", "--operation", "Read",
          "--resource-pattern-type", "match"], "literal or prefixed"),
        (["delete", "--allow-principal", "User:a"], "give a resource"),
    ):  # fmt: skip
        result = invoke("admin", configs, "acls", *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)


def test_acls_on_a_broker_without_an_authorizer(secured_broker):
    result = CliRunner().invoke(
        main, ["acls", "list", "--bootstrap", secured_broker.bootstrap_for("PLAINTEXT")]
    )
    assert (result.exit_code, result.stdout) == (2, ""), result.stdout
    assert result.stderr.startswith("error: describe ACLs: the cluster has no authorizer")
    assert "SECURITY_DISABLED" in result.stderr


# ---------------------------------------------------------------- broker TLS settings


def test_a_key_password_for_an_unencrypted_key_is_refused(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    keystore = tmp_path / "server.pem"
    keystore.write_bytes(
        server.private_key_pem.bytes() + b"".join(b.bytes() for b in server.cert_chain_pems)
    )
    result = subprocess.run(
        [
            sys.executable, "-m", "onceflow", "broker", "--data-dir", str(tmp_path / "data"),
            "--config", "listeners=SSL://127.0.0.1:0",
            "--config", f"ssl.keystore.location={keystore}",
            "--config", "ssl.key.password=not-needed",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr  # a bad setting, like any TLS file it cannot use
    assert "ready" not in result.stdout
    assert (
        f"ssl.key.password is set but the private key in '{keystore}' is not encrypted"
        in result.stderr
    )
