-- 0013: where a document's blocks lie (issue 16). A write numbers the blocks
-- of each document consecutively (index/write.go), so a document's blocks
-- are block_id first_block .. first_block + block_count - 1, and a delete or
-- a replace finds them through the block_id key instead of scanning every
-- block's doc_id. block_count -1: not known (a row whose blocks are not
-- consecutive, or a file that lost the columns); those are found by doc_id.
ALTER TABLE documents ADD COLUMN first_block BIGINT DEFAULT -1;
ALTER TABLE documents ALTER COLUMN first_block SET NOT NULL;
ALTER TABLE documents ADD COLUMN block_count INTEGER DEFAULT -1;
ALTER TABLE documents ALTER COLUMN block_count SET NOT NULL;
UPDATE documents SET first_block = m.lo, block_count = m.n
FROM (SELECT doc_id, min(block_id) AS lo, max(block_id) AS hi, count(*)::INTEGER AS n FROM blocks GROUP BY doc_id) m
WHERE m.doc_id = documents.doc_id AND m.hi - m.lo + 1 = m.n;
UPDATE documents SET first_block = 0, block_count = 0
WHERE doc_id NOT IN (SELECT doc_id FROM blocks);
