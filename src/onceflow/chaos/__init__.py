"""The chaos matrix: SIGKILL a pattern's worker at every step of its flow, then audit.

``onceflow chaos`` (command.py) runs the cells of ``scenarios.py`` with ``harness.py``:
each cell (``cells.py``) starts a worker process (``worker.py``: the seed articles' flows
step by step from ``flows.py``, or onceflow's ``Runner``), arms a crash point, restarts the
worker, and audits its outputs with ``onceflow.verify``. Results are rendered by
``matrix.py`` (table, JSON, Markdown) and ``heatmap.py`` (PNG).
"""
