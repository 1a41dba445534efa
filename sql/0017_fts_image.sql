-- 0017: the full-text index's image (issue 16). Opening an index loads
-- the dictionary, the document frequencies, every block's field lengths
-- and the segment list into memory (index/fts Load): at 1M passages, 2.4M
-- rows read one by one through database/sql, 1.4 s of every open (every
-- CLI command, every server start, every switch to a new generation). A
-- writer's Close saves what it holds in memory here, encoded
-- (index/fts/image.go): part 0 is a header with a fingerprint of every row
-- the image was made from and a SHA-256 of the payload; parts 1.. are the
-- payload in order. Load uses the image only when the fingerprint,
-- computed again from the tables, still matches; any write since (by any
-- process or version) changes it, and Load reads the tables instead. It is
-- derived data: dropping the rows only makes the next open slower.
CREATE TABLE fts_image (
    part INTEGER NOT NULL,
    data BLOB    NOT NULL
);
