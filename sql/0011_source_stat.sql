-- 0011: what escurel sync compares a file with (issue 14), copied from the
-- record like every other documents column.
-- bytes is the size of the raw bytes (the blob); for a file over the size
-- cap, never read, the size the file had. 0 for rows from before 0011,
-- until a rebuild or a sync fills it.
ALTER TABLE documents ADD COLUMN bytes BIGINT DEFAULT 0;
ALTER TABLE documents ALTER COLUMN bytes SET NOT NULL;
-- source_mtime is the file's modification time when it was listed for
-- ingest, in nanoseconds since the Unix epoch; 0 when the bytes did not
-- come from a file (Index.Ingest) or before 0011.
ALTER TABLE documents ADD COLUMN source_mtime BIGINT DEFAULT 0;
ALTER TABLE documents ALTER COLUMN source_mtime SET NOT NULL;
