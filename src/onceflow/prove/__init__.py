"""``onceflow prove``: kill the user's own pipeline at every step and audit it.

``run_proof(ProofOptions(...))`` writes keyed, sequence-numbered input to a fresh broker,
runs the pipeline (a Runner handler, or any command) through seeded kill schedules until
the input is drained, audits the outputs with ``onceflow.verify`` and returns a ``Proof``:
the verdict, or the smallest failing schedule with the command that replays it.

Modules: options (what a run is told), target (how the pipeline is started),
runner_file / runner_host / handler (Runner mode), schedule and steps (kills), lives (one
process start), probe (watching progress), trial (one audited run), shrink, explain
(likely causes), proof (the whole run), report and heatmap (output).
"""

from onceflow.prove.errors import ProveError
from onceflow.prove.options import ProofOptions
from onceflow.prove.proof import Proof, run_proof

__all__ = ["Proof", "ProofOptions", "ProveError", "run_proof"]
