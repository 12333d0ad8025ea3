"""The ``onceflow`` command line: one module per command group.

Shared options and exit codes: ``options.py``; error handling and the list of commands
(each imported only when it runs: ``onceflow broker`` does not load the admin client, the
console or Spark): ``root.py``; printing tables and JSON: ``output.py``. Library logic
lives outside this package (``onceflow.admin``, ``onceflow.topics``, ``onceflow.verify``, ...).
"""

from onceflow.cli.root import main

__all__ = ["main"]
