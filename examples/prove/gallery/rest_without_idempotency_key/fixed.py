"""FIXED: the REST call carries an idempotency key. Each payment request names its order in
an Idempotency-Key header; the service pays a key once and answers a repeated request
with the first payment, so an order delivered again after a kill is not paid again.

    onceflow prove command --input orders --output table:payments --schema schema.sql \\
        --quick -- python fixed.py

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
        headers={"Content-Type": "application/json", "Idempotency-Key": f"pay-{order['id']}"},
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
