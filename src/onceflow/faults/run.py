"""A pipeline run through a fault schedule, to its end: the fault engine's loop.

``FaultRun`` starts the pipeline's workers, injects every fault of the schedule when its
trigger fires, restarts what a fault killed, and ends the run the way the pipeline ends:
``until="drained"`` stops the workers once the outputs have settled and ``drained()``
says the input is processed (a consumer that runs forever); ``until="exit"`` waits for
each worker's last, unarmed life to exit 0 (a Runner that exits when idle).

Two kinds of trigger, each its own queue, so faults on different workers land
independently: faults *of a life* (a crash or pause point, ``time:N``) are armed one per
life of their worker, in schedule order; faults watched *across lives* (``progress:N``, a
request trap) happen in schedule order, each armed once the previous one landed.
``pace(allowance)`` tells an input feeder how many input records may exist so far, so that
the input never runs out before every fault had its chance (None: all of it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from onceflow.faults.actions import ActionUnavailable, FaultActions
from onceflow.faults.commit_traps import CommitTrapControl
from onceflow.faults.progress import Progress
from onceflow.faults.results import Landing, Limits, RunError, RunResult
from onceflow.faults.schedule import KILL, PAUSE, PROGRESS, TIME, Fault, Schedule, trigger_queues
from onceflow.faults.slack import REQUEST_WINDOW, WATCH_WINDOW, Slack, input_window
from onceflow.faults.traps import TrapControl
from onceflow.faults.workers import Ending, Life, ProcessFactory, Worker
from onceflow.protocol.codec import api_name

POLL_S = 0.005
ARMED_POLL_S = 0.001  # watching for the next commit to kill right after it
COMMIT_WAIT_S = 0.05  # a kill waiting for the next commit waits this long at a time
TRAP_GRACE_S = 1.0  # outputs this old and no such request yet: it never sends one
START_GRACE_S = 6.0  # a (re)started worker idle this long before its first output is idle
MAX_CRASHES = 5  # error exits in a row without output growth before the run gives up
STALL_RESTARTS = 1  # a supervised run restarts a stalled pipeline this often, then stops


class FaultRun:
    def __init__(
        self,
        factory: ProcessFactory,
        schedule: Schedule,
        work: Path,
        *,
        workers: int = 1,
        until: str = "drained",
        actions: FaultActions | None = None,
        progress: Progress | None = None,
        drained: Callable[[float, float], bool] | None = None,
        pace: Callable[[int | None], None] | None = None,
        input_done: Callable[[], bool] | None = None,
        input_records: int | None = None,
        batch_hint: int = 50,
        limits: Limits | None = None,
        traps: TrapControl | None = None,
        commit_traps: CommitTrapControl | None = None,
        restart_crashed: bool = True,
        supervised: bool = False,
        before_life: Callable[[int, int], None] | None = None,
        on_life: Callable[[Life], None] | None = None,
        on_landing: Callable[[Landing], None] | None = None,
    ) -> None:
        if until not in ("drained", "exit"):
            raise ValueError(f"until must be 'drained' or 'exit', not {until!r}")
        self.workers = [Worker(n, factory, work) for n in range(1, workers + 1)]
        self.schedule = schedule
        self.until = until
        self.actions = actions or FaultActions()
        self.progress = progress
        # (how long nothing happened, the pipeline's usual time between writes) -> done?
        self.drained = drained or (lambda _quiet_s, _usual_gap_s: True)
        self.pace = pace
        self.input_done = input_done  # all the input written (None: nothing paced)
        self.input_records = input_records  # how many ``pace`` can let in (None: unknown)
        self.batch_hint = batch_hint
        self.limits = limits or Limits()
        self.before_life = before_life
        self.on_life = on_life
        self.on_landing = on_landing
        self.traps = traps
        self.commit_traps = commit_traps
        self.restart_crashed = restart_crashed  # False: an error exit ends the run (RunError)
        # a deployment's supervisor: restart a worker that stalls (no progress for stall_s),
        # never take an early exit for the pipeline's fault
        self.supervised = supervised
        self.inside, self.watched = trigger_queues(
            schedule, workers, request_traps=traps is not None,
            commit_traps=commit_traps is not None,
        )  # fmt: skip
        self.result = RunResult()
        self.started = 0.0
        self.outputs = 0
        self.last_growth = 0.0
        self.outputs_at_fault = 0  # progress:N counts from the previous watched fault
        self.crashes_in_a_row = 0
        self.slack = Slack(self.limits.settle_s, START_GRACE_S)  # idle with faults pending
        self.commit_watch: int | None = None  # the outputs when a kill began to wait for
        # the next commit of the outputs (None: no kill waits)
        self.trap_armed_at: int | None = None  # the outputs when the head's trap was armed
        self.first_output_at: float | None = None
        self.last_start = 0.0  # when a worker last (re)started ...
        self.outputs_at_last_start = 0  # ... and the outputs then
        self.first_quiet_start = 0.0  # the first (re)start since the outputs last grew

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> RunResult:
        self.started = self.last_growth = time.monotonic()
        self.outputs = self.outputs_at_fault = self._count()
        try:
            for worker in self.workers:
                self._start(worker)
            while not self._step():
                pass
        finally:
            for worker in self.workers:
                if worker.process is not None:
                    worker.process.kill()
        for fault in self._faults_to_come():
            self._land(fault, False, "the pipeline finished before it")
        self.result.outputs = self.outputs
        self.result.seconds = time.monotonic() - self.started
        return self.result

    def _step(self) -> bool:
        """One look at everything; True once the run is over."""
        now = time.monotonic()
        count = self._count()
        if count != self.outputs:
            self.slack.output_grew(now - self.last_growth)
            self.outputs, self.last_growth, self.crashes_in_a_row = count, now, 0
            if self.first_output_at is None and count > 0:
                self.first_output_at = now
        self._pace()
        for stray in self.commit_traps.strays(now) if self.commit_traps is not None else ():
            self.workers[stray - 1].thaw()  # stopped at a trap that is not the fault's
        for worker in self.workers:
            self._check_ended(worker)
            armed = worker.armed
            if armed is None or worker.process is None:
                continue
            if armed.trigger == TIME and worker.process.seconds * 1000 >= armed.occurrence:
                self._at_time(worker, armed)
            elif not armed.kills_worker and worker.paused():
                self._land_paused(worker)
        armed = self._check_watched(now)
        if self._finished(now):
            return True
        self._check_limits(now)
        time.sleep(ARMED_POLL_S if armed else POLL_S)
        return False

    def _count(self) -> int:
        return self.progress.count() if self.progress is not None else 0

    def _pending(self) -> bool:
        return bool(self.watched or any(self.inside.values()))

    def _faults_to_come(self) -> list[Fault]:
        return [*self.watched, *(fault for queue in self.inside.values() for fault in queue)]

    # -- workers ------------------------------------------------------------------------------

    def _start(self, worker: Worker) -> None:
        queue = self.inside[worker.index]
        armed = queue.popleft() if queue else None
        if self.before_life is not None:
            self.before_life(worker.index, worker.lives + 1)
        worker.start(armed, self.outputs)
        self.last_start, self.outputs_at_last_start = time.monotonic(), self.outputs
        if self.first_quiet_start <= self.last_growth:
            self.first_quiet_start = self.last_start

    def _check_ended(self, worker: Worker) -> None:
        if worker.finished:
            return
        life = worker.ended(self._count())
        if life is None:
            return
        self.result.lives.append(life)
        if self.on_life is not None:
            self.on_life(life)
        armed = worker.armed
        if armed is not None:
            if armed.kills_worker and life.ending is Ending.CRASH_POINT:
                self._land(armed, True)
            else:
                self._land(armed, False, f"the worker {life.ending} before reaching it")
        if life.ending is Ending.SIGKILL_UNEXPECTED:
            raise RunError(f"worker {worker.index} was SIGKILLed by someone else; see "
                           f"{worker.log_path}")  # fmt: skip
        if life.ending is Ending.CRASHED:
            self._crashed(worker, life)
        elif life.ending is Ending.EXITED:
            if not self._exited(worker, life):
                return
        else:
            self.crashes_in_a_row = 0
        self._start(worker)

    def _exited(self, worker: Worker, life: Life) -> bool:
        """A life that exited 0: start the next one? (False: the worker is done.)"""
        if self.until == "exit":
            if worker.armed is None and not self.inside[worker.index]:
                worker.finished = True
                return False
            return True
        if life.number == 1 and life.outputs_after == life.outputs_before and not self._drained():
            raise RunError(f"the pipeline exited at once with code 0: "
                           f"{self._last_line(worker)}")  # fmt: skip
        if not self._pending() and self._drained():
            worker.finished = True
            return False
        self.result.restarts += 1
        return True

    def _crashed(self, worker: Worker, life: Life) -> None:
        if not self.restart_crashed:
            raise RunError(f"worker {worker.index} exited {life.exit_code}: "
                           f"{self._last_line(worker)}")  # fmt: skip
        first = life.number == 1 and life.outputs_after == life.outputs_before
        if first and self.outputs == 0 and not self.supervised:
            raise RunError(f"the pipeline exited at once with code {life.exit_code}: "
                           f"{self._last_line(worker)}")  # fmt: skip
        self.crashes_in_a_row += 1
        if self.crashes_in_a_row > MAX_CRASHES:
            raise RunError(f"the pipeline crashed {self.crashes_in_a_row} times in a row "
                           f"without progress (code {life.exit_code}): "
                           f"{self._last_line(worker)}")  # fmt: skip
        self.result.restarts += 1

    def _last_line(self, worker: Worker) -> str:
        return f"{worker.last_error_line} (see {worker.log_path})"

    # -- faults -------------------------------------------------------------------------------

    def _land(self, fault: Fault, landed: bool, note: str = "", applicable: bool = True) -> None:
        landing = Landing(fault, landed, time.monotonic() - self.started, self.outputs, note,
                          applicable)  # fmt: skip
        self.result.landings.append(landing)
        if self.on_landing is not None:
            self.on_landing(landing)

    def _at_time(self, worker: Worker, fault: Fault) -> None:
        worker.armed = None
        if fault.kills_worker:
            worker.kill(fault)
            self._land(fault, True)
            self._check_ended(worker)
        else:
            self._apply(fault, lambda: None)

    def _land_paused(self, worker: Worker) -> None:
        fault = worker.armed
        assert fault is not None
        worker.armed = None
        self._apply(fault, worker.release)

    def _check_watched(self, now: float) -> bool:
        """Inject the next watched fault if its trigger fired; True while waiting for the
        next commit to kill right after it."""
        if not self.watched:
            return False
        fault = self.watched[0]
        if fault.trapped:
            return self._check_trap(fault)
        worker = self.workers[fault.worker - 1]
        if fault.trigger == PROGRESS:
            if self.outputs - self.outputs_at_fault < fault.occurrence:
                return False
            progress = self.progress
            if fault.action == KILL and progress is not None and progress.sees_writes:
                # right after the next commit that writes outputs (not one that only stores
                # offsets, say), before whatever the pipeline does after it
                if self.commit_watch is None:
                    self.commit_watch = self.outputs
                    progress.written()  # commits from here on
                    return True
                grew = False
                if progress.await_write(COMMIT_WAIT_S):
                    # frozen at once (its next step must not run), then killed if the
                    # commit wrote outputs, else let go
                    worker.freeze()
                    grew = progress.count() > self.commit_watch
                    if not grew:
                        worker.thaw()
                if not grew and now - self.last_growth < self.limits.settle_s:
                    return True
        self._next_watched()
        if fault.action == KILL:
            if not worker.running:
                self._land(fault, False, "the worker was not running")
                return False
            worker.kill(fault)
            self._land(fault, True)
            self._check_ended(worker)
        else:
            self._apply(fault, lambda: None)
        return False

    def _trap_control(self, fault: Fault) -> TrapControl | CommitTrapControl:
        control = self.traps if fault.at_request else self.commit_traps
        assert control is not None
        return control

    def _check_trap(self, fault: Fault) -> bool:
        """Arm the head fault's trap once; inject the fault once it springs. A trap for a
        request the pipeline never sends (or a commit it never makes through Python's
        sqlite3) becomes the same fault timed by its outputs."""
        traps = self._trap_control(fault)
        if self.trap_armed_at is None:
            traps.arm(fault)
            self.trap_armed_at = self.outputs
            return False
        sprung = traps.sprung(fault)
        if sprung is None:
            # outputs were written a while ago (by a worker that fetches), and no such
            # request or commit: it will not come (the offsets live elsewhere, the
            # pipeline is not Python)
            first = self.first_output_at
            evidence = first is not None and time.monotonic() - first > TRAP_GRACE_S
            fetches = not isinstance(traps, TrapControl) or traps.fetched(fault)
            if evidence and fetches and not traps.seen(fault):
                traps.disarm_all(fault)
                worker = fault.worker or 1
                self.watched[0] = replace(fault, trigger=PROGRESS, worker=worker)
                self.trap_armed_at = None
            return False
        worker = self.workers[sprung - 1]
        if isinstance(traps, TrapControl):
            held = f"held worker {sprung}'s {api_name(traps.sprung_api(sprung))} request"
            traps.disarm_all(fault, sprung)

            def release() -> None:
                traps.release(sprung)
        else:
            held = f"worker {sprung} stopped right after a database commit of its outputs"
            traps.disarm_all(fault, sprung)
            release = worker.thaw
        self._next_watched()
        if fault.action == KILL:
            worker.kill(fault)
            self._land(fault, True, held)
            self._check_ended(worker)
        else:
            self._apply(replace(fault, worker=sprung), release, held)
        return False

    def _next_watched(self) -> None:
        self.slack.reset()
        self.watched.popleft()
        self.outputs = max(self.outputs, self._count())  # the next fault counts from here
        self.outputs_at_fault = self.outputs
        self.trap_armed_at = None
        self.commit_watch = None

    def _apply(self, fault: Fault, release: Callable[[], None], held: str = "") -> None:
        """Do a fault other than a kill; the run waits for it, and the fault lets in the
        input the pipeline works on meanwhile (a fault strikes a pipeline under load)."""
        paused = None
        if fault.action == PAUSE:  # the worker at work now, if the run can tell
            busiest = self.commit_traps.busiest() if self.commit_traps is not None else None
            fault = replace(fault, worker=busiest or fault.worker)
            paused = self.workers[fault.worker - 1]
            paused.freeze()
        try:
            note = self.actions.apply(fault, release, self._load_under_fault)
        except ActionUnavailable as error:
            release()
            self._land(fault, False, str(error))
            return
        finally:
            if paused is not None:
                paused.thaw()
        self._land(fault, True, f"{held}; {note}" if held else note)
        self.outputs_at_fault = max(self.outputs, self._count())  # progress counts from its end

    def _load_under_fault(self, batches: int) -> None:
        if self.pace is None:
            return
        outputs = max(self.outputs, self._count())
        load = outputs + batches * self.batch_hint + self.slack.records
        if self.input_records is not None:  # the faults after it keep their triggers' input
            kept = sum(input_window(fault, self.batch_hint) for fault in self._faults_to_come())
            load = min(load, max(outputs, self.input_records - kept))
        self.pace(load)

    # -- pacing and the end ---------------------------------------------------------------------

    def _pace(self) -> None:
        if self.pace is None:
            return
        pending = [*self.watched][:1] + [
            w.armed for w in self.workers if w.armed is not None
        ]  # fmt: skip
        if not pending:
            self.pace(None)
            return
        if self._starved():
            self.slack.grow(self.batch_hint, time.monotonic())
        if self.commit_watch is not None:  # a little more, for the commit the kill waits for
            self.pace(self.commit_watch + WATCH_WINDOW + self.slack.records)
            return
        head = self.watched[0] if self.watched else None
        armed = head is not None and head.trapped and self.trap_armed_at is not None
        if armed and not self._trap_control(head).seen(head):  # until it shows it does that
            self.pace(self.trap_armed_at + REQUEST_WINDOW + self.slack.records)
            return
        window = max(input_window(fault, self.batch_hint) for fault in pending)
        self.pace(self.outputs + window + self.slack.records)

    def _starved(self) -> bool:
        """Faults are pending and nothing moves for want of input (see Slack), not because a
        worker is still starting (a restarted consumer reads what its last life left
        uncommitted first: input let in meanwhile would all go into its first transaction)."""
        now = time.monotonic()
        if not self.slack.idle(now, self.last_growth, self.outputs):
            return False
        started = self.outputs > self.outputs_at_last_start
        return started or now - self.last_start >= START_GRACE_S

    def _finished(self, now: float) -> bool:
        if self.until == "exit":
            return all(w.finished for w in self.workers)
        if all(w.finished for w in self.workers):
            return True
        armed = any(w.armed is not None and w.running for w in self.workers)
        settle = self.limits.armed_settle_s if armed else self.limits.settle_s
        if not self.result.stuck and (now - self.last_growth < settle or not self._drained()):
            return False
        for worker in self.workers:
            if worker.armed is not None:
                self._land(worker.armed, False, "the pipeline drained its input before it")
                worker.armed = None
            if worker.process is not None:
                seconds = worker.process.seconds
                code = worker.stop()
                life = Life(worker.index, worker.lives, None, False, Ending.STOPPED, code,
                            seconds, worker.outputs_at_start, self.outputs)  # fmt: skip
                worker.process = None
                worker.finished = True
                self.result.lives.append(life)
                if self.on_life is not None:
                    self.on_life(life)
        return True

    def _check_limits(self, now: float) -> None:
        limits = self.limits
        if limits.timeout_s is not None and now - self.started > limits.timeout_s:
            raise RunError(f"the pipeline did not finish in {limits.timeout_s:.0f} s")
        if self.progress is None:
            return
        if self.outputs == 0 and now - self.started > limits.start_s and not self.supervised:
            raise RunError(f"the pipeline wrote no output in {limits.start_s:.0f} s after "
                           f"starting (see {self.workers[0].log_path})")  # fmt: skip
        started = self.first_output_at is not None or now - self.started > limits.start_s
        if not started or now - self.last_growth <= limits.stall_s:
            return
        if self.until == "exit" or not self._drained():  # (exit: any stop is a stall)
            if self.supervised and self.result.stalls < STALL_RESTARTS:
                # a liveness probe: a client can wedge under failover
                self.result.stalls += 1
                self.last_growth = now
                for worker in self.workers:
                    if worker.running:
                        worker.kill(None)
                return
            given = self.input_done is None or self.input_done()
            if self.outputs and given and not self._pending() and not self._armed():
                # it worked, every fault happened, all the input is in, and it stopped:
                # what is missing now is missing (the audit says what)
                self.result.stuck = True
                return
            raise RunError(f"the pipeline never drained its input: no output for "
                           f"{limits.stall_s:.0f} s with input left (see "
                           f"{self.workers[0].log_path})")  # fmt: skip

    def _drained(self) -> bool:
        return self.drained(self._quiet_s(time.monotonic()), self.slack.usual_gap_s)

    def _quiet_s(self, now: float) -> float:
        """How long nothing happened: no output grew, and no worker (re)started that may
        still be starting: a restart gives the pipeline START_GRACE_S to write again (once
        since its last output: a Runner that exits when idle restarts every second)."""
        since = self.first_quiet_start
        if since > self.last_growth and now - since < START_GRACE_S:
            return 0.0
        return now - self.last_growth

    def _armed(self) -> bool:
        return any(worker.armed is not None for worker in self.workers)
