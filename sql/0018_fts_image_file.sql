-- 0018: the full-text index's image moves out of the database into a file
-- beside it (index/fts/image.go; issue 16). Saved as rows, a writer's
-- Close wrote it (11 MB at 100k passages, 16 MB at 1M) through DuckDB's
-- write-ahead log, so every Close had to checkpoint, and a checkpoint
-- after a small write rewrites the whole last row group of blocks and its
-- indexes (2 s at 100k). A Close after a small write now leaves its log
-- for the next open to replay, and the image in a file adds nothing to
-- it. The rows were derived: dropping them costs the first open after
-- this migration its speed, nothing else.
DROP TABLE IF EXISTS fts_image;
