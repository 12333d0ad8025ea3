"""``onceflow prove``: run the user's own pipeline through faults and audit it.

``run_proof(ProofOptions(...))`` writes keyed, sequence-numbered input, paced by the
pipeline's progress, to a fresh broker per trial (or a cluster), runs the pipeline (a
Runner handler, any command, a PySpark job; one or more workers) through seeded fault
schedules with the fault engine (``onceflow.faults``) until the input is drained, audits
the outputs with ``onceflow.verify`` and returns a ``Proof``: the verdict, or the smallest
failing schedule with the command that replays it.

Modules: options (what a run is told), target (how the pipeline is started),
runner_file / runner_host / handler (Runner mode), steps (where it can be killed by name),
brokers and victims (where a trial runs, which node a node fault kills), database (a
trial's database), generator (the input), expect (tables of state), trial (one audited
run), shrink, explain and reachable (likely causes), proof (the whole run), report and
heatmap (output).
"""

from onceflow.prove.errors import ProveError, ProveFailure
from onceflow.prove.options import ProofOptions
from onceflow.prove.proof import Proof, run_proof

__all__ = ["Proof", "ProofOptions", "ProveError", "ProveFailure", "run_proof"]
