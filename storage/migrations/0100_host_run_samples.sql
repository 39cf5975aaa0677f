-- 0100_host_run_samples: what each attempt of a local stage used of the
-- host, minute by minute, from its cgroup (memory in bytes, CPU time in
-- seconds), kept like the per-minute GPU records so that a run's memory and
-- CPU use can be read after it ended.
--
-- samples:        the readings (about one a second) the minute is made of
-- mem_mean/max:   the memory in use over those readings
-- mem_peak:       the cgroup's own high-water mark at the minute's last
--                 reading (memory.peak, memory.max_usage_in_bytes): it
--                 catches what fell between readings
-- mem_limit:      its memory limit (memory:), 0 = none
-- cpu_seconds:    CPU time (user and system) used in this minute
-- cpu_total:      CPU time the attempt had used by the minute's last reading
--                 (a new owner that adopts the attempt counts on from it)
-- cpu_limit_milli: its CPU limit (cpus:) in thousandths of a CPU, 0 = none

CREATE TABLE host_run_samples (
    run_id          TEXT    NOT NULL,
    stage           TEXT    NOT NULL,
    attempt         INTEGER NOT NULL,
    minute_ns       INTEGER NOT NULL,
    samples         INTEGER NOT NULL DEFAULT 0,
    mem_mean        INTEGER NOT NULL DEFAULT 0,
    mem_max         INTEGER NOT NULL DEFAULT 0,
    mem_peak        INTEGER NOT NULL DEFAULT 0,
    mem_limit       INTEGER NOT NULL DEFAULT 0,
    cpu_seconds     REAL    NOT NULL DEFAULT 0,
    cpu_total       REAL    NOT NULL DEFAULT 0,
    cpu_limit_milli INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stage, attempt, minute_ns)
) WITHOUT ROWID;

-- Retention drops old minutes by time, as it does the GPU records.
CREATE INDEX host_run_samples_by_minute ON host_run_samples (minute_ns);

-- Deleting a run deletes its records (no foreign key: a minute of a run
-- deleted while it was being flushed is simply not written).
CREATE TRIGGER runs_delete_host_run_samples AFTER DELETE ON runs
BEGIN
    DELETE FROM host_run_samples WHERE run_id = old.id;
END;
