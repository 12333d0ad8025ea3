"""One module per API family; importing this package registers every handler."""

from onceflow.broker.handlers import (  # noqa: F401
    acls,
    admin_configs,
    admin_topics,
    api_versions,
    cluster,
    delete_records,
    fetch,
    find_coordinator,
    groups,
    list_offsets,
    metadata,
    offsets,
    produce,
    producer_id,
    sasl,
    scram_credentials,
    transaction_admin,
    transactions,
    write_txn_markers,
)
