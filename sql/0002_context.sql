-- 0002: structural context beside the verbatim body.
-- context is '[<title> › <heading path> › p.<page>]' (U+203A between parts),
-- or '' when contextualization is off or there is nothing to say. It feeds
-- retrieval only; the body stays what a user reads and cites.
-- DuckDB cannot add a column with a constraint, hence ADD, then SET NOT NULL.
ALTER TABLE blocks ADD COLUMN context VARCHAR DEFAULT '';
ALTER TABLE blocks ALTER COLUMN context SET NOT NULL;
-- heading_path: the open headings, outermost first, as a JSON array of
-- strings ('[]' when none). Not a VARCHAR[]: DuckDB 1.5.6 fails SET NOT NULL
-- on a list column added in the same transaction to a table with rows.
ALTER TABLE blocks ADD COLUMN heading_path VARCHAR DEFAULT '[]';
ALTER TABLE blocks ALTER COLUMN heading_path SET NOT NULL;
ALTER TABLE blocks ADD COLUMN page INTEGER DEFAULT 0;             -- 1-based; 0 when the format has no pages
ALTER TABLE blocks ALTER COLUMN page SET NOT NULL;
