-- How many of a stage's metric points could never be stored (the store
-- refused them for good, or they came after their writer stopped): counted
-- at each attempt's end, so that a stage that lost points never reads as a
-- plain success.
ALTER TABLE stages ADD COLUMN points_lost INTEGER NOT NULL DEFAULT 0;
