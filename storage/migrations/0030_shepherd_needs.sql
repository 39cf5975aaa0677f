-- 0030_shepherd_needs: what a stage asks of the machine besides GPUs, and
-- what its run allows the shepherd to do with it.
--   * stages.cpu_milli, mem_mib: host CPUs (thousandths) and memory; 0 = not asked;
--   * stages.estimate_ns: the user's estimate of the stage's run time; 0 = none;
--   * stages.reason_code: the code of stages.reason (a shepherd code such as
--     cpu or gpu_memory, or the engine's own); '' when there is none;
--   * runs.spot: the run may be preempted (stopped with SIGTERM, requeued,
--     resumed); runs.share: it may share a GPU when memory fits.
ALTER TABLE stages ADD COLUMN cpu_milli INTEGER NOT NULL DEFAULT 0 CHECK (cpu_milli >= 0);
ALTER TABLE stages ADD COLUMN mem_mib INTEGER NOT NULL DEFAULT 0 CHECK (mem_mib >= 0);
ALTER TABLE stages ADD COLUMN estimate_ns INTEGER NOT NULL DEFAULT 0 CHECK (estimate_ns >= 0);
ALTER TABLE stages ADD COLUMN reason_code TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN spot INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN share INTEGER NOT NULL DEFAULT 0;
