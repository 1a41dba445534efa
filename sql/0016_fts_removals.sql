-- 0016: a removal from the full-text index is one row (issue 16). A delete
-- (or the replaced blocks of an ingest) appended its tombstones to
-- fts_tombstones and its document-frequency changes to fts_df_deltas: two
-- appends, each a statement on the delete's path. One row of fts_removals
-- holds both, encoded (index/fts/removal.go): the blocks tombstoned (still
-- in posting lists until a compaction) and the (negative) changes to each
-- term's document frequencies. A BLOB rather than list columns: the
-- commit of one BLOB costs about half. The rows of the two older tables
-- stay where they are: the full-text index still loads them, and a
-- compaction empties all three.
CREATE TABLE fts_removals (
    data BLOB NOT NULL
);
