"""Pure logic of the security package: listeners, --add-scram, SCRAM, ACL matching and
the StandardAuthorizer's decision rules."""

from __future__ import annotations

import base64

import pytest

from onceflow.broker.listeners import parse_listeners
from onceflow.broker.security.acl_model import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from onceflow.broker.security.acl_store import AclStore
from onceflow.broker.security.authorizer import Authorizer
from onceflow.broker.security.settings import SecuritySettingError, parse_add_scram
from onceflow.security.plain import PlainFailure, parse_plain
from onceflow.security.protocols import SecurityProtocol
from onceflow.security.scram import (
    ScramClientExchange,
    ScramFailure,
    ScramServerExchange,
    credential_from_password,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE, DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
ALLOW, DENY = Permission.ALLOW, Permission.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def test_listeners_with_names_of_their_own_and_advertised_addresses():
    listeners = parse_listeners(
        "INTERNAL://0.0.0.0:0,PLAINTEXT://[::1]:9092",
        "INTERNAL://broker.example:19093",
        "INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
    )
    internal, plain = listeners
    assert internal.protocol is SecurityProtocol.SASL_SSL
    assert internal.bound(40000).advertised == "INTERNAL://broker.example:19093"
    assert plain.host == "::1" and plain.bound(9092).advertised == "PLAINTEXT://[::1]:9092"
    assert parse_listeners("SSL://0.0.0.0:0")[0].bound(5).advertised == "SSL://127.0.0.1:5"


@pytest.mark.parametrize(
    ("listeners", "advertised", "message"),
    [
        ("FOO://h:1", "", "FOO has no security protocol"),
        ("PLAINTEXT://h", "", "expected NAME://HOST:PORT"),
        ("PLAINTEXT://h:99999", "", "outside 0..65535"),
        ("PLAINTEXT://h:1,PLAINTEXT://h:2", "", "appears twice"),
        ("PLAINTEXT://h:1", "SSL://h:2", "not one of the listeners"),
    ],
)
def test_bad_listeners_are_explained(listeners, advertised, message):
    with pytest.raises(ValueError, match=message):
        parse_listeners(listeners, advertised)


def test_add_scram_syntax():
    user = parse_add_scram('SCRAM-SHA-512=[name=alice,password="a=b",iterations=8192]')
    assert (user.mechanism, user.name, user.password, user.iterations) == (
        "SCRAM-SHA-512",
        "alice",
        "a=b",
        8192,
    )
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "x"):
        with pytest.raises(SecuritySettingError):
            parse_add_scram(bad)
    with pytest.raises(SecuritySettingError, match=r"4096\.\.16384"):
        parse_add_scram("SCRAM-SHA-256=[name=a,password=b,iterations=10]")


def test_plain_message():
    assert parse_plain(b"\0alice\0secret") == ("alice", "secret")
    assert parse_plain(b"alice\0alice\0secret") == ("alice", "secret")
    for bad in (b"alice\0secret", b"bob\0alice\0secret", b"\0\0secret", b"\0a\0"):
        with pytest.raises(PlainFailure):
            parse_plain(bad)


def scram_server(mechanism: str, users: dict[str, str]) -> ScramServerExchange:
    credentials = {name: credential_from_password(mechanism, pw) for name, pw in users.items()}
    return ScramServerExchange(mechanism, credentials.get, b"secret")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_scramp_client(mechanism):
    server = scram_server(mechanism, {"al,ice": "secret"})
    client = ScramClientExchange(mechanism, "al,ice", "secret")
    final = server.respond(client.final(server.respond(client.first())))
    client.verify(final)  # the client checks the server's signature
    assert server.complete and server.username == "al,ice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "secret")])
def test_scram_wrong_password_and_unknown_user_fail_alike(user, password):
    server = scram_server("SCRAM-SHA-256", {"alice": "secret"})
    client = ScramClientExchange("SCRAM-SHA-256", user, password)
    server_first = server.respond(client.first())
    assert b",s=" in server_first and b",i=4096" in server_first  # unknown users too
    with pytest.raises(ScramFailure, match="proof does not match"):
        server.respond(client.final(server_first))
    assert not server.complete


def test_scram_accepts_the_repeated_client_nonce_of_old_librdkafka():
    """librdkafka < 2.6 sends r=<client nonce><client nonce><server nonce>; Kafka accepts
    it since 3.8.1 (the proof covers the message as sent)."""
    import hashlib
    import hmac

    server = scram_server("SCRAM-SHA-256", {"alice": "secret"})
    client_first_bare = "n=alice,r=abc"
    server_first = server.respond(f"n,,{client_first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", b"secret", base64.b64decode(fields["s"]), int(fields["i"])
    )
    without_proof = f"c=biws,r=abc{fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    assert server.respond(final.encode()).startswith(b"v=")
    assert server.complete


@pytest.mark.parametrize(
    "message",
    [b"garbage", b"p=tls-unique,,n=alice,r=abc", b"n,,n=al=ice,r=abc", b"\xff\xfe"],
)
def test_scram_malformed_client_first_fails(message):
    with pytest.raises(ScramFailure):
        scram_server("SCRAM-SHA-256", {"alice": "secret"}).respond(message)


def acl(name, operation, permission=ALLOW, principal="User:alice", pattern=LITERAL, **kw):
    return AclBinding(
        kw.get("resource", TOPIC),
        name,
        pattern,
        principal,
        kw.get("host", "*"),
        operation,
        permission,
    )


def authorizer(tmp_path, bindings, super_users=(), allow_if_no_acl=False) -> Authorizer:
    store = AclStore(tmp_path)
    store.add(bindings)
    return Authorizer(store, set(super_users), allow_if_no_acl)


def allowed(auth, operation, name, principal="User:alice", host="10.0.0.1", resource=TOPIC):
    return auth.authorize(principal, host, operation, resource, name, log_denied=False)


def test_deny_beats_allow_and_implied_describe(tmp_path):
    auth = authorizer(
        tmp_path,
        [
            acl("orders", Operation.ALL, principal="User:*"),
            acl("orders", WRITE, DENY),
            acl("payments", READ),
            acl("payments", READ, DENY, principal="User:bob"),
        ],
    )
    assert allowed(auth, READ, "orders") and not allowed(auth, WRITE, "orders")
    assert allowed(auth, WRITE, "orders", principal="User:bob")
    assert allowed(auth, DESCRIBE, "payments")  # READ implies DESCRIBE
    assert not allowed(auth, READ, "payments", principal="User:bob")
    # a DENY of READ does not deny DESCRIBE, but nothing allows it to bob either
    assert not allowed(auth, DESCRIBE, "payments", principal="User:bob")
    assert not allowed(auth, READ, "unrelated")


def test_prefixed_wildcard_and_host(tmp_path):
    auth = authorizer(
        tmp_path,
        [
            acl("sales-", READ, pattern=PREFIXED),
            acl("*", READ, resource=GROUP),
            acl("audit", READ, host="10.0.0.9"),
        ],
    )
    assert allowed(auth, READ, "sales-eu") and not allowed(auth, READ, "sale")
    assert allowed(auth, READ, "any-group", resource=GROUP)
    assert not allowed(auth, READ, "audit") and allowed(auth, READ, "audit", host="10.0.0.9")


def test_super_users_and_allow_everyone_if_no_acl_found(tmp_path):
    auth = authorizer(tmp_path, [acl("orders", READ)], ["User:admin"], allow_if_no_acl=True)
    assert allowed(auth, WRITE, "orders", principal="User:admin")
    assert allowed(auth, WRITE, "no-acl-at-all", principal="User:bob")
    assert not allowed(auth, WRITE, "orders", principal="User:bob")  # covered: no ALLOW


def test_acls_are_durable_and_the_cache_follows_changes(tmp_path):
    auth = authorizer(tmp_path, [acl("orders", READ)])
    assert allowed(auth, READ, "orders")
    auth.acls.remove([AclFilter(TOPIC, "orders", PatternType.ANY, None, None, Operation.ANY,
                                Permission.ANY)])  # fmt: skip
    assert not allowed(auth, READ, "orders")
    auth.acls.add([acl("orders", WRITE)])
    assert [a.operation for a in AclStore(tmp_path).all()] == [WRITE]


def test_filters_match_like_kafka():
    literal, prefixed, wildcard = (
        acl("a-b", READ),
        acl("a-", READ, pattern=PREFIXED),
        acl("*", READ),
    )

    def match(name, pattern):
        return AclFilter(TOPIC, name, pattern, None, None, Operation.ANY, Permission.ANY)

    assert [f.matches(literal) for f in (match("a-b", LITERAL), match("a-b", PREFIXED))] == [
        True,
        False,
    ]
    assert all(match("a-b", PatternType.MATCH).matches(x) for x in (literal, prefixed, wildcard))
    assert not match("b", PatternType.MATCH).matches(prefixed)
    assert match(None, PatternType.ANY).matches(prefixed)


@pytest.mark.parametrize(
    "binding",
    [
        acl("", READ),
        acl("x", Operation.ANY),
        acl("x", READ, Permission.ANY),
        acl("x", READ, pattern=PatternType.MATCH),
        acl("x", READ, principal="alice"),
        acl("not-kafka-cluster", Operation.ALTER, resource=ResourceType.CLUSTER),
    ],
)
def test_invalid_bindings_are_refused(binding):
    with pytest.raises(InvalidAcl):
        binding.validate()
