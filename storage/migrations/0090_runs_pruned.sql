-- A run a study's pruner stopped ends in a state of its own, pruned, with
-- the decision's evidence as its reason. Archives written before it have
-- such runs as cancelled: the stored decision says which they are.
UPDATE runs
SET state = 'pruned',
    error = 'stopped early by its study''s pruner: ' || (SELECT evidence FROM run_prunes p WHERE p.run_id = runs.id)
WHERE state = 'cancelled' AND id IN (SELECT run_id FROM run_prunes);
