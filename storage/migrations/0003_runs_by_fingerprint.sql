-- Dedup and the reproducibility check look runs up by fingerprint.
CREATE INDEX runs_by_fingerprint ON runs (fingerprint, state, created_ns DESC) WHERE fingerprint <> '';
