-- 0071_run_flag_only: runs.flag_only: the sentinel only flags (and
-- notifies) anomalies of the run, never retries or stops it, whatever its
-- template answers (a sweep's point stays the point it was launched as).
ALTER TABLE runs ADD COLUMN flag_only INTEGER NOT NULL DEFAULT 0;
