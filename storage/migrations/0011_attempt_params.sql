-- 0011_attempt_params: the parameters each attempt ran with (the run's
-- parameters JSON when it started). A sentinel retry may change a run's
-- parameters; its earlier attempts keep what they ran with, so "launched
-- with lr 1, ran with 0.1" can be told from the archive. '' for attempts
-- recorded before this column existed.
ALTER TABLE attempts ADD COLUMN params TEXT NOT NULL DEFAULT '';
