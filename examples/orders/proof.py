"""What `onceflow prove` needs to prove the orders pipeline unchanged.

The pipeline's input has its own shape (orders keyed by store) and ``store_revenue`` holds
running totals, not one row per order; so the proof takes the input from the pipeline's
own generator (``generator:order``) and compares ``store_revenue`` with the totals
computed here from the orders it wrote (``proof:revenue``). The confirmations topic has
one record per order and is audited by its ``order_id``::

    cd examples/orders
    onceflow prove spark pipeline.py --input orders --topics-file topics.yaml \\
        --output table:store_revenue --output topic:order-confirmations \\
        --generator generator:order --expect proof:revenue \\
        --id-field order_id --key-field store --quick \\
        -- --bootstrap {bootstrap} --database-url {database_url} \\
           --checkpoint-dir {checkpoint} --trigger "500 milliseconds" \\
           --max-offsets-per-trigger 40
"""


def revenue(orders: list[dict]) -> dict[str, list[dict]]:
    """The rows of store_revenue once every order was counted exactly once."""
    rows: dict[str, dict] = {}
    for order in orders:
        row = rows.setdefault(order["store"], {"store": order["store"], "revenue": 0, "orders": 0})
        row["revenue"] += order["amount"]
        row["orders"] += 1
    return {"table:store_revenue": list(rows.values())}
