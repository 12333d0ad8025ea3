"""onceflow: exactly-once Kafka pipelines for Python and PySpark."""

__version__ = "0.1.0"
