"""BROKEN: a REST call without an idempotency key. Each order is paid with a POST to the
payment service, then the offsets are committed: a kill after a payment and before the
offset commit delivers the order again and pays it twice (the service's payments table
holds it twice: duplicated).

    onceflow prove command --input orders --output table:payments --schema schema.sql \\
        --quick -- python broken.py

The service runs beside the pipeline during the proof (started here when $PAYMENTS_URL is
not set); prove audits its table.
"""

import json
import os
import urllib.request

import payment_service
from confluent_kafka import Consumer

payments_url = os.environ.get("PAYMENTS_URL") or payment_service.start(
    os.environ["ONCEFLOW_DATABASE_PATH"]
)


def pay(order):
    request = urllib.request.Request(
        f"{payments_url}/payments",
        data=json.dumps({**order, "amount": 100 + order["seq"]}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "payments",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    for message in messages:
        pay(json.loads(message.value()))
    consumer.commit(asynchronous=False)
