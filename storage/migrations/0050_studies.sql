-- A study searches a template's parameters: its trials are ordinary runs.
-- Everything a study decides is stored here, so that a study whose owner
-- was killed goes on where it stood.
CREATE TABLE studies (
    id            TEXT    PRIMARY KEY,
    template      TEXT    NOT NULL,  -- the template as the user named it (to load it again)
    template_name TEXT    NOT NULL,
    template_yaml TEXT    NOT NULL,  -- the text the study began with
    objective     TEXT    NOT NULL,  -- the metric searched
    goal          TEXT    NOT NULL CHECK (goal IN ('min', 'max')),
    space         TEXT    NOT NULL,  -- JSON: the searched parameters (tuner.Space)
    fixed         TEXT    NOT NULL,  -- JSON: the values of every other parameter
    budget        INTEGER NOT NULL CHECK (budget > 0),
    parallel      INTEGER NOT NULL CHECK (parallel > 0),
    parallel_rule TEXT    NOT NULL,  -- 'auto' or the number the user gave
    pruner        TEXT    NOT NULL,  -- 'none', 'median' or 'asha'
    warmup        INTEGER NOT NULL DEFAULT 0,
    seed          INTEGER NOT NULL,
    executor      TEXT    NOT NULL DEFAULT '',
    state         TEXT    NOT NULL CHECK (state IN ('running', 'finished', 'stopped')),
    reason        TEXT    NOT NULL DEFAULT '',
    created_ns    INTEGER NOT NULL,
    finished_ns   INTEGER
);

-- A trial is numbered within its study; it is written before its run is
-- submitted (state 'submitting') and linked to the run after, so that a
-- study restarted in between finds the run instead of submitting another.
CREATE TABLE study_trials (
    study_id    TEXT    NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
    number      INTEGER NOT NULL,
    params      TEXT    NOT NULL,    -- JSON: every parameter's value, as the run gets them
    method      TEXT    NOT NULL DEFAULT '',  -- how the tuner chose them
    prediction  TEXT    NOT NULL DEFAULT '',  -- JSON: the model's expectation, when it had one
    run_id      TEXT    UNIQUE REFERENCES runs (id) ON DELETE SET NULL,
    state       TEXT    NOT NULL CHECK (state IN ('submitting', 'running', 'done', 'pruned', 'failed', 'cancelled')),
    objective   REAL,
    created_ns  INTEGER NOT NULL,
    finished_ns INTEGER,
    PRIMARY KEY (study_id, number)
);

-- Why a run was stopped early: the pruner's decision and the numbers it
-- compared. Written in the same transaction as the run's cancel request.
CREATE TABLE run_prunes (
    run_id     TEXT    PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    reason     TEXT    NOT NULL,     -- a code: below_median, below_rung
    metric     TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    value      REAL,
    reference  REAL,
    trials     INTEGER NOT NULL,
    rung       INTEGER NOT NULL DEFAULT 0,
    rung_step  INTEGER NOT NULL DEFAULT 0,
    compared   TEXT    NOT NULL DEFAULT '[]',  -- JSON: [{"run": ID, "value": x}] the other trials at the step
    evidence   TEXT    NOT NULL,     -- the decision in a sentence
    decided_ns INTEGER NOT NULL
);
