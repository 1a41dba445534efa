-- 0012: document metadata (issue 17).
-- meta is the metadata read from the document's front matter (derived,
-- like the blocks); meta_given the metadata the ingest caller gave
-- (Input.Meta, --meta), copied from the record. Both are JSON objects,
-- keys sorted; a search's filter sees meta overridden key by key by
-- meta_given, with the built-in fields (source, media_type, language,
-- title, ingested_at, folder) from the other columns.
ALTER TABLE documents ADD COLUMN meta VARCHAR DEFAULT '{}';
ALTER TABLE documents ALTER COLUMN meta SET NOT NULL;
ALTER TABLE documents ADD COLUMN meta_given VARCHAR DEFAULT '{}';
ALTER TABLE documents ALTER COLUMN meta_given SET NOT NULL;
