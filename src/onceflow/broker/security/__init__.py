"""The broker's security: sessions and principals, SASL, credentials, ACLs, authorization."""
