"""One module per API family; importing this package registers every handler."""

from onceflow.broker.handlers import (  # noqa: F401
    admin_configs,
    admin_topics,
    api_versions,
    cluster,
    consumer_groups,
    delete_records,
    fetch,
    find_coordinator,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_id,
    replicas,
    transaction_admin,
    transactions,
    write_txn_markers,
)
