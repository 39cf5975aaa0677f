-- 0080_gpu_records: the per-minute GPU record becomes enough for a report.
--
-- Every record says whether its GPU is simulated (NIUMA_SIMULATE_GPUS), so
-- pretend telemetry can never pass for a measurement; it also keeps the mean
-- temperature, the peak power, how many samples saw the clocks held down
-- (thermal or power limits, not idleness), which reasons, and the XID
-- errors of the minute. gpu_run_samples is the memory each run's processes
-- held on the GPU in that minute; gpus is every GPU ever sampled, so an
-- attempt's GPU UUID can be named (model, index, simulated) long after.

ALTER TABLE gpu_samples ADD COLUMN simulated        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gpu_samples ADD COLUMN samples          INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gpu_samples ADD COLUMN temp_mean        REAL;
ALTER TABLE gpu_samples ADD COLUMN power_max        REAL;
ALTER TABLE gpu_samples ADD COLUMN throttled        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gpu_samples ADD COLUMN throttle_reasons TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE gpu_samples ADD COLUMN xids             TEXT    NOT NULL DEFAULT '[]';

CREATE TABLE gpu_run_samples (
    gpu       TEXT    NOT NULL,
    minute_ns INTEGER NOT NULL,
    run_id    TEXT    NOT NULL,
    stage     TEXT    NOT NULL DEFAULT '',
    samples   INTEGER NOT NULL DEFAULT 0,
    mem_mean  INTEGER NOT NULL DEFAULT 0,
    mem_max   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (gpu, minute_ns, run_id, stage)
) WITHOUT ROWID;

CREATE INDEX gpu_run_samples_by_run ON gpu_run_samples (run_id, gpu, minute_ns);
CREATE INDEX gpu_run_samples_by_minute ON gpu_run_samples (minute_ns);

-- A GPU process may belong to a run of another data directory, so there is
-- no foreign key; deleting a run deletes its GPU use here.
CREATE TRIGGER runs_delete_gpu_run_samples AFTER DELETE ON runs
BEGIN
    DELETE FROM gpu_run_samples WHERE run_id = old.id;
END;

CREATE TABLE gpus (
    uuid          TEXT    NOT NULL PRIMARY KEY CHECK (uuid <> ''),
    idx           INTEGER NOT NULL DEFAULT 0,
    name          TEXT    NOT NULL DEFAULT '',
    simulated     INTEGER NOT NULL DEFAULT 0,
    mem_total     INTEGER NOT NULL DEFAULT 0,
    power_limit   REAL,
    first_seen_ns INTEGER NOT NULL,
    last_seen_ns  INTEGER NOT NULL
) WITHOUT ROWID;
