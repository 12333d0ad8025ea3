"""Register a Python data source so that several queries can use it at the same time.

Spark (4.x, at least up to 4.3) keeps one environment map per registered Python data
source: ``spark.dataSource.register`` wraps the class in a ``SimplePythonFunction`` whose
``envVars`` is a plain ``java.util.HashMap``, and ``UserDefinedPythonDataSource
.createPythonFunction`` hands that same map to every function it builds for every query.
``PythonStreamingSourceRunner.init()`` (one per streaming query, on the query's own thread)
then writes ``SPARK_LOCAL_DIRS``, ``SPARK_AUTH_SOCKET_TIMEOUT``, ``SPARK_BUFFER_SIZE`` and
``SPARK_PYTHON_RUNTIME`` into that shared map without copying it. When two queries on the
source start together (a restart on existing checkpoints lines their threads up to the
millisecond) the unsynchronised puts can corrupt the HashMap: its size counts an entry
that is not in its table. The map is serialized into every read task, and
``HashMap.readObject`` then asks for one entry more than was written:
``java.io.OptionalDataException`` on the executors, every micro-batch of every query on
the source fails. docs/spark.md has the details.

``register_data_source`` does what ``spark.dataSource.register`` does, with a
``java.util.concurrent.ConcurrentHashMap`` as the environment map: concurrent puts are
safe, and its serialized form has no element count that a racing put could contradict.
"""

from __future__ import annotations

from typing import Any

DATA_SOURCE_CLASS = (
    "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource"
)


def register_data_source(spark: Any, source: type) -> None:
    """Register the Python data source class ``source`` with ``spark`` (a SparkSession)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # Spark Connect: the server builds the function; nothing to swap
        spark.dataSource.register(source)
        return
    from pyspark.core.rdd import _prepare_for_python_RDD

    context = spark.sparkContext
    jvm = context._jvm
    command, broadcast_vars, environment, includes = _prepare_for_python_RDD(context, source)
    env = jvm.java.util.concurrent.ConcurrentHashMap()
    for key, value in environment.items():
        env.put(key, value)
    function = jvm.org.apache.spark.api.python.SimplePythonFunction(
        bytearray(command),
        env,
        includes,
        context.pythonExec,
        context.pythonVer,
        broadcast_vars,
        context._javaAccumulator,
    )
    data_source = getattr(jvm, DATA_SOURCE_CLASS)(function)
    jsession.dataSource().registerPython(source.name(), data_source)


def environment_map(spark: Any, name: str) -> Any:
    """The JVM environment map of the registered Python data source ``name`` (for tests)."""
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    return manager.lookupDataSource(name).dataSourceCls().envVars()
