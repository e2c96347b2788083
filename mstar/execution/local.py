"""Evaluations on this machine, with ingested knowledge bases kept for reuse (mstar.evaluation)."""
from __future__ import annotations

from mstar.config import RunConfig
from mstar.evaluation import EvalResult, SessionCache, evaluate
from mstar.evaluation.sessions import session_key
from mstar.evaluation.prestart import PRESTARTS
from mstar.evaluation.read_state import read_changes_state, read_may_ask_llm
from mstar.evaluation.run import prestart
from mstar.execution.jobs import EvalJob
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter
from mstar.tasks import Task
from sandbox.engine.spares import SPARES

SPARE_WORKERS = 2


class LocalExecutor:
    in_process = True   # evaluations run here: their loaded programs are in this process's LOAD_INFO
    def __init__(self, task: Task, train_indices: list[int], router: LLMRouter, cfg: RunConfig) -> None:
        self.task, self.router, self.cfg = task, router, cfg
        self.train = [task.episodes[i] for i in train_indices]
        self.sessions = SessionCache(cfg.evolution.keep_sessions)
        self._expected: dict[object, str] = {}   # prestart token -> the knowledge base it announced
        # Each iteration starts two workers at once (the gates', the evaluation's): two launched
        # ahead save ~30 ms each on its critical path (sandbox.engine.spares). Launched as the
        # iteration asks its reflector (mstar.iteration.mutate), not as soon as the last ones were
        # taken: a spare holds ~15 MB while it waits, and none is taken after the last iteration.
        SPARES.keep(SPARE_WORKERS, refill=False)

    def run(self, job: EvalJob) -> EvalResult:
        try:
            return self._run(job)
        finally:
            if job.take_prestart and job.keep and not job.all_episodes:
                self.sessions.built(self._key(job.source))   # a guess waiting for its knowledge base goes on

    def _run(self, job: EvalJob) -> EvalResult:
        # The live display (mstar.run.eval_progress), when the CLI set one on the router: one
        # entry per evaluation in flight, named by the step it belongs to (seed_x, iter_003, test).
        tracker = getattr(self.router, "eval_progress", None)
        if tracker is None:
            return run_job(job, self.task, self.train, self.router, self.cfg, self.sessions)
        entry = tracker.begin(llm_scope.current() or job.split)
        try:
            return run_job(job, self.task, self.train, self.router, self.cfg, self.sessions, progress=entry.update)
        finally:
            tracker.end(entry)

    def prestart(self, source: str) -> object | None:
        """Start `source`'s worker for its coming static evaluation (mstar.evaluation.prestart);
        the knowledge base it will build is announced, so that a guess waits for it. None when one
        is kept already -- e.g. the parent's, for a child that changed only its prompts
        (mstar.evaluation.knowledge_identity): the evaluation will read from it, not start a worker."""
        if self.sessions.holds(self._key(source)):
            return None
        token = prestart(source, self.cfg.sandbox)
        if token is not None:
            self._expected[token] = self._key(source)
            self.sessions.expect(self._expected[token])
        return token

    def drop_prestart(self, token: object) -> None:
        PRESTARTS.drop(token)
        key = self._expected.pop(token, None)
        if key is not None:
            self.sessions.built(key)   # built by now, or never to be

    def _key(self, source: str) -> str:
        return session_key(source, [ep.id for ep in self.train])

    def keep_only(self, sources: list[str]) -> int:
        """Only the knowledge bases of `sources` (over the training episodes) stay kept: the rest
        are closed, with their workers (the race reads only its racers'; the tests write their own)."""
        return self.sessions.keep_only(self._key(src) for src in sources)

    def close(self) -> None:
        PRESTARTS.drop_all()
        self.sessions.close()
        SPARES.keep(0)


def run_job(job: EvalJob, task: Task, train: list, router: LLMRouter, cfg: RunConfig,
            sessions: SessionCache | None, progress=None) -> EvalResult:
    """The job on this machine (the Ray executor's workers call this too)."""
    pool = task.test if job.split == "test" else task.validation
    queries = list(pool) if job.indices is None else [pool[i] for i in job.indices]
    episodes = list(task.episodes) if job.all_episodes else train
    # A test writes every episode; when the training episodes are every episode (a LoCoMo
    # conversation's ~30 sessions, the sample's 50), that is the knowledge base the program's
    # validation wrote and kept: a test that may (`read_kept`: not one started early,
    # mstar/final/held_out.py) reads it instead -- the same writes in the same order, and reads
    # that only read. Not for a program whose reads may ask the LLM: its test, in the background,
    # would hold the shared worker's read slots while its calls wait behind the race's, and the
    # race's reads on that worker behind them.
    shares = job.read_kept and job.all_episodes and [e.id for e in episodes] == [e.id for e in train] \
        and not read_changes_state(job.source) and not read_may_ask_llm(job.source)
    return evaluate(job.source, train if shares else episodes, queries, metric=task.score, router=router,
                    sandbox=cfg.sandbox, workers=cfg.evolution.workers,
                    sessions=sessions if job.keep or shares else None, keep=job.keep,
                    outage_threshold=cfg.evolution.outage_threshold, progress=progress,
                    take_prestart=job.take_prestart)
