-- 0010: stable block ids (issue 14). blocks.block_id stays the internal,
-- dense number the full-text index and the vectors key on; it may change on
-- rebuild and is never shown. public_id is the id a caller keeps and cites:
-- 16 lowercase hex digits, the first 8 bytes of
--   sha256(doc_id ' ' blob_id ' ' byte_start ' ' byte_end ' ' body)
-- (the offsets in decimal, single spaces between; no field before the body
-- holds a space, so the input is unambiguous), computed by index.blockID for
-- new blocks and here, once, for the rows of an older file. The same bytes
-- of the same document get the same id in any index built from them; a
-- changed document (another blob) gets new ids, so an old id never names
-- other text.
--
-- DuckDB adds no constraint with ALTER TABLE, and a CREATE INDEX would
-- forbid later ALTERs of the table, so the table is made again with a
-- UNIQUE column, in the order its columns had.
CREATE TABLE blocks_0010 (
    block_id       BIGINT  PRIMARY KEY,  -- internal: from the block_ids sequence; never shown
    doc_id         VARCHAR NOT NULL,
    ord            INTEGER NOT NULL,
    body           VARCHAR NOT NULL,
    byte_start     BIGINT  NOT NULL,
    byte_end       BIGINT  NOT NULL,
    context        VARCHAR NOT NULL DEFAULT '',
    heading_path   VARCHAR NOT NULL DEFAULT '[]',
    page           INTEGER NOT NULL DEFAULT 0,
    parent_id      VARCHAR NOT NULL DEFAULT '',
    heading        VARCHAR NOT NULL DEFAULT '',
    window_text    VARCHAR NOT NULL DEFAULT '',
    parent_locator VARCHAR NOT NULL DEFAULT '',
    public_id      VARCHAR NOT NULL UNIQUE  -- 16 hex digits, see above
);
INSERT INTO blocks_0010
SELECT b.block_id, b.doc_id, b.ord, b.body, b.byte_start, b.byte_end, b.context, b.heading_path, b.page,
       b.parent_id, b.heading, b.window_text, b.parent_locator,
       left(sha256(b.doc_id || ' ' || coalesce(d.blob_id, '') || ' ' || b.byte_start::VARCHAR || ' ' ||
                   b.byte_end::VARCHAR || ' ' || b.body), 16)
FROM blocks b LEFT JOIN documents d ON d.doc_id = b.doc_id;
DROP TABLE blocks;
ALTER TABLE blocks_0010 RENAME TO blocks;
