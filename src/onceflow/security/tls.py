"""TLS contexts from PEM files (Kafka's ``ssl.*`` settings) and the mTLS principal."""

from __future__ import annotations

import ssl

from cryptography import x509

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(
    keystore: str,
    key_password: str | None = None,
    truststore: str | None = None,
    client_auth: str = "none",
) -> ssl.SSLContext:
    """A server context: ``keystore`` holds the private key and certificate chain (PEM)."""
    if not keystore:
        raise ValueError("a TLS listener needs ssl.keystore.location (a PEM key and certificate)")
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}")
    _check_key_password(keystore, key_password)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_key(context, keystore, key_password, "ssl.keystore.location")
    if client_auth != "none":
        if not truststore:
            raise ValueError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
        _load_trust(context, truststore, "ssl.truststore.location")
        context.verify_mode = CLIENT_AUTH[client_auth]
    return context


def client_context(
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
    key_password: str | None = None,
    verify_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context trusting ``ca_location`` (else the system's CAs), with an optional
    client certificate for mutual TLS."""
    context = ssl.create_default_context()
    if ca_location:
        _load_trust(context, ca_location, "ssl.ca.location")
    context.check_hostname = verify_hostname
    if certificate_location or key_location:
        _load_key(
            context,
            certificate_location or key_location or "",
            key_password,
            "ssl.certificate.location",
            key_location,
        )
    return context


ENCRYPTED_KEY_MARKERS = (b"-----BEGIN ENCRYPTED PRIVATE KEY-----", b"Proc-Type: 4,ENCRYPTED")


def _check_key_password(keystore: str, key_password: str | None) -> None:
    """Refuse ssl.key.password for a key that is not encrypted, as Kafka does: the
    password would be ignored, so the setting says something that is not true."""
    if not key_password:
        return
    try:
        with open(keystore, "rb") as file:
            pem = file.read()
    except OSError:
        return  # _load_key says what is wrong with the file
    if b"PRIVATE KEY-----" in pem and not any(m in pem for m in ENCRYPTED_KEY_MARKERS):
        raise ValueError(
            f"ssl.key.password is set but the private key in {keystore!r} is not encrypted: "
            "remove ssl.key.password, or encrypt the key (docs/security.md shows how)"
        )


def _load_key(
    context: ssl.SSLContext,
    certificate: str,
    password: str | None,
    setting: str,
    key: str | None = None,
) -> None:
    try:
        context.load_cert_chain(certificate, key, password=password or None)
    except FileNotFoundError:
        raise ValueError(f"{setting}: no such file {certificate!r}") from None
    except ssl.SSLError as error:
        raise ValueError(
            f"{setting}: cannot load a key and certificate from {certificate!r} "
            f"(wrong ssl.key.password, or not PEM?): {error.reason or error}"
        ) from None


def _load_trust(context: ssl.SSLContext, path: str, setting: str) -> None:
    try:
        context.load_verify_locations(cafile=path)
    except FileNotFoundError:
        raise ValueError(f"{setting}: no such file {path!r}") from None
    except ssl.SSLError as error:
        raise ValueError(f"{setting}: no PEM certificates in {path!r}: {error}") from None


def certificate_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """Kafka's default mTLS principal: ``User:`` and the client certificate's subject as
    an RFC 4514 distinguished name (``User:CN=alice,O=Example``); None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
