"""Schemas of API versions Kafka 4.0 dropped (so kio no longer models them) that clients
still in use send, written in kio's style so kio's readers and writers handle them."""
