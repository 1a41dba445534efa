-- 0003: the full-text index, version 0: one posting row per (term, block).
-- A block's indexed text is context + '\n' + body, analyzed as one field.
-- Written in the same transaction as the blocks, so it is never stale.
CREATE TABLE postings (
    term     VARCHAR NOT NULL,  -- analyzed token
    block_id BIGINT  NOT NULL,
    tf       INTEGER NOT NULL   -- occurrences of term in the block's indexed text
);
CREATE TABLE block_stats (
    block_id BIGINT  PRIMARY KEY,
    length   INTEGER NOT NULL   -- tokens in the block's indexed text (BM25 |d|)
);
