-- 0010_attempt_identity: what the engine decides is stored, not only held
-- in memory, so that a new owner carries on exactly where the last one was.
--
--   attempts.token: the attempt's identity, chosen before it is launched;
--     an executor names what it launches by it (an environment variable
--     its processes inherit, a container's name and label, a job's name),
--     so a later owner finds the attempt even without its handle.
--   stages.free_attempts: attempts that spend none of the template's
--     retries (the sentinel's retries, a backend that was away or went
--     away mid-attempt); sentinel_attempts: how many of those the sentinel
--     asked for.
--   stages.pending_*: a decision about the current attempt taken while it
--     runs and applied when it ends (the sentinel's stop or retry with new
--     parameters, a preemption).
ALTER TABLE attempts ADD COLUMN token TEXT NOT NULL DEFAULT '';
ALTER TABLE stages ADD COLUMN free_attempts INTEGER NOT NULL DEFAULT 0 CHECK (free_attempts >= 0);
ALTER TABLE stages ADD COLUMN sentinel_attempts INTEGER NOT NULL DEFAULT 0 CHECK (sentinel_attempts >= 0);
ALTER TABLE stages ADD COLUMN pending_action TEXT NOT NULL DEFAULT '';
ALTER TABLE stages ADD COLUMN pending_note TEXT NOT NULL DEFAULT '';
ALTER TABLE stages ADD COLUMN pending_params TEXT NOT NULL DEFAULT '';
