"""Kafka's security model, shared by the broker and onceflow's own protocol client.

Security protocols, TLS contexts from PEM files, SASL PLAIN and SCRAM exchanges.
"""
