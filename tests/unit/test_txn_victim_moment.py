"""When prove kills a transaction coordinator (``victims._opened``): once the pipeline's
transactional id has a transaction open, through a node still starting, or after
ONGOING_WAIT_S."""

from __future__ import annotations

import pytest

from onceflow.admin import transactions
from onceflow.admin.transactions import TransactionListing
from onceflow.prove import victims


def listing(transactional_id: str) -> TransactionListing:
    return TransactionListing(transactional_id, 7, "Ongoing", 2)


@pytest.fixture
def answers(monkeypatch):
    """What each ListTransactions round answers: a list of listings, or an error."""
    script: list[object] = []

    def list_transactions(_session, states=(), producer_ids=()):
        assert states == ("Ongoing",)
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(transactions, "list_transactions", list_transactions)
    monkeypatch.setattr(victims, "ONGOING_POLL_S", 0.0)
    return script


def test_the_moment_is_the_pipelines_transaction_open(answers):
    answers += [[], [listing("another-program")], [listing("orders-copier")], []]
    assert victims._opened(None, "orders-copier") == "its transaction open"
    assert answers == [[]]  # it stopped asking at the open transaction


def test_a_node_still_starting_is_asked_again(answers):
    answers += [OSError("connection refused"), [listing("orders-copier")]]
    assert victims._opened(None, "orders-copier") == "its transaction open"


def test_no_transaction_open_is_said_after_the_wait(answers, monkeypatch):
    monkeypatch.setattr(victims, "ONGOING_WAIT_S", 0.05)
    answers += [[listing("another-program")]]
    assert victims._opened(None, "orders-copier") == "no transaction open within 0 s"
