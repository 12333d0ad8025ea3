"""The ``onceflow-database`` sink: options, tables and SQL, the tasks' direct and staged
writes, the ledger of direct writes, and the driver's commit."""

from onceflow.spark.database_sink.commit import database_offsets
from onceflow.spark.database_sink.data_source import DatabaseSinkDataSource

__all__ = ["DatabaseSinkDataSource", "database_offsets"]
