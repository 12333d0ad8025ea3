"""The input and the expected state of the totals examples.

``order`` is the input generator (``--generator store_orders:order``): order ``n`` of a store,
keyed by the store. ``totals`` is the expectation (``--expect store_orders:totals``): the rows
``store_totals`` must hold once every order was counted exactly once.
"""

import random

STORES = [f"store-{number}" for number in range(6)]


def order(n: int, rng: random.Random) -> tuple[str, dict]:
    store = rng.choice(STORES)
    return store, {"order_id": f"o-{n:05d}", "store": store, "amount": rng.randint(1, 500)}


def totals(orders: list[dict]) -> dict[str, list[dict]]:
    rows: dict[str, dict] = {}
    for item in orders:
        row = rows.setdefault(item["store"], {"store": item["store"], "revenue": 0, "orders": 0})
        row["revenue"] += item["amount"]
        row["orders"] += 1
    return {"table:store_totals": list(rows.values())}
