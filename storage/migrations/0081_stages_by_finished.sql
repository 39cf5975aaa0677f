-- 0081_stages_by_finished: the metrics exporter reads the stages that
-- finished since its last scrape (stage durations) without a table scan.
CREATE INDEX stages_by_finished ON stages (finished_ns) WHERE finished_ns IS NOT NULL;
