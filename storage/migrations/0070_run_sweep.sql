-- The runs one launch made from a sweep share an id, so that views can
-- group them; '' for a single run.
ALTER TABLE runs ADD COLUMN sweep TEXT NOT NULL DEFAULT '';
