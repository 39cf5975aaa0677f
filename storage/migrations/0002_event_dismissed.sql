-- A user can dismiss an anomaly: it stays in the record, marked as seen.
ALTER TABLE events ADD COLUMN dismissed_ns INTEGER;
