-- 0006: where the document's title came from: 'extraction' (front matter,
-- first H1, file name) or 'input' (the ingest caller gave it, as a BEIR
-- corpus gives titles beside its texts); a rebuild passes an input title
-- again. (VARCHAR, not BOOLEAN: DuckDB 1.5.6 fails SET NOT NULL on a
-- BOOLEAN column added in the same transaction to a table with a primary
-- key.)
ALTER TABLE documents ADD COLUMN title_from VARCHAR DEFAULT 'extraction';
ALTER TABLE documents ALTER COLUMN title_from SET NOT NULL;
