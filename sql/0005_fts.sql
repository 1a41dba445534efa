-- 0005: the segment-based full-text index (package index/fts) replaces the
-- row-per-posting tables of 0003. Its rows derive from the blocks: Open
-- re-indexes any block that has none, so an index upgraded from 0003 is
-- searchable again without a rebuild.
DROP TABLE postings;
DROP TABLE block_stats;

-- The dictionary. Append-only; a compaction drops terms no block holds.
CREATE TABLE fts_terms (
    term_id INTEGER NOT NULL,
    term    VARCHAR NOT NULL
);

-- Per block: field lengths in terms (BM25F) and the sensitivity level of its
-- document (0 public, 1 internal, 2 restricted), for filtering before
-- ranking.
CREATE TABLE fts_blocks (
    block_id    BIGINT   NOT NULL,
    len_body    INTEGER  NOT NULL,
    len_context INTEGER  NOT NULL,
    level       TINYINT  NOT NULL
);

-- A segment is the postings of one write batch, or of a merge of segments.
CREATE TABLE fts_segments (
    segment_id INTEGER   NOT NULL,
    blocks     INTEGER   NOT NULL,  -- blocks with postings in the segment
    min_block  BIGINT    NOT NULL,
    max_block  BIGINT    NOT NULL,
    bytes      BIGINT    NOT NULL,  -- posting list bytes
    created_at TIMESTAMP NOT NULL   -- UTC
);

-- One row per (term, segment): the term's posting list in the segment,
-- varint-coded block-id gaps with the term frequency in body and context
-- (index/fts/codec.go), and how many postings it holds per field.
CREATE TABLE fts_postings (
    term_id    INTEGER NOT NULL,
    segment_id INTEGER NOT NULL,
    df         INTEGER NOT NULL,  -- postings (blocks holding the term)
    df_body    INTEGER NOT NULL,  -- of them, holding it in the body
    df_context INTEGER NOT NULL,  -- of them, holding it in the context
    data       BLOB    NOT NULL
);
CREATE INDEX fts_postings_term ON fts_postings (term_id);

-- Deleted blocks still present in posting lists, until a compaction.
CREATE TABLE fts_tombstones (
    block_id BIGINT NOT NULL
);

-- Document-frequency changes of deleted blocks (negative), summed with
-- fts_postings at load, so frequencies count live blocks only. A compaction
-- empties it.
CREATE TABLE fts_df_deltas (
    term_id    INTEGER NOT NULL,
    df         INTEGER NOT NULL,
    df_body    INTEGER NOT NULL,
    df_context INTEGER NOT NULL
);
