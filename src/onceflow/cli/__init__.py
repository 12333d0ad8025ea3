"""The ``onceflow`` command line: one module per command group.

Shared options and exit codes: ``options.py``; error handling: ``root.py``; printing
tables and JSON: ``output.py``. Library logic lives outside this package
(``onceflow.admin``, ``onceflow.topics``, ``onceflow.verify``, ...).
"""

from onceflow.cli.acls import acls_command
from onceflow.cli.broker import broker
from onceflow.cli.chaos import chaos_command
from onceflow.cli.console import console_command
from onceflow.cli.demo import demo_command
from onceflow.cli.docs import docs_command
from onceflow.cli.groups import groups_command
from onceflow.cli.kafka_cluster import kafka_cluster_command
from onceflow.cli.log import log_command
from onceflow.cli.prove import prove_command
from onceflow.cli.relay import relay_command
from onceflow.cli.root import main
from onceflow.cli.topics import topics_command
from onceflow.cli.transactions import transactions_command
from onceflow.cli.verify import verify_command

for _command in (
    broker,
    demo_command,
    topics_command,
    groups_command,
    transactions_command,
    acls_command,
    verify_command,
    chaos_command,
    prove_command,
    relay_command,
    log_command,
    console_command,
    kafka_cluster_command,
    docs_command,
):
    main.add_command(_command)

__all__ = ["main"]
