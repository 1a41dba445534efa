-- 0009: documents beyond Markdown (HTML, DOCX, PDF) and failed documents.
-- status is 'ok', or 'failed' when the document's bytes could not be
-- extracted (a corrupt or encrypted PDF, a zip bomb, a time-out, a file over
-- the size cap): the record and, where read, the blob are kept, the
-- document has no blocks, reason says why, and a rebuild tries again.
ALTER TABLE documents ADD COLUMN status VARCHAR DEFAULT 'ok';
ALTER TABLE documents ALTER COLUMN status SET NOT NULL;
ALTER TABLE documents ADD COLUMN reason VARCHAR DEFAULT '';     -- '' when ok
ALTER TABLE documents ALTER COLUMN reason SET NOT NULL;
-- extractor is the extract.Extractor ID that read the bytes, e.g. 'pdf/1';
-- '' before 0009 (markdown/1 or text/1, the only extractors then).
ALTER TABLE documents ADD COLUMN extractor VARCHAR DEFAULT '';
ALTER TABLE documents ALTER COLUMN extractor SET NOT NULL;
ALTER TABLE documents ADD COLUMN pages INTEGER DEFAULT 0;       -- pages of a PDF; 0 otherwise
ALTER TABLE documents ALTER COLUMN pages SET NOT NULL;

-- The text that blocks' byte spans index, for formats whose text is not the
-- blob itself (HTML, DOCX, PDF): text[byte_start:byte_end] = body. Markdown
-- and plain text have no row here; their text is the blob.
CREATE TABLE document_text (
    doc_id VARCHAR PRIMARY KEY,
    text   VARCHAR NOT NULL
);

-- The extractor IDs of the binary that created the index, space separated,
-- e.g. 'docx/1 html/1 markdown/1 pdf/1 text/1'.
ALTER TABLE manifest ADD COLUMN extractors VARCHAR DEFAULT '';
ALTER TABLE manifest ALTER COLUMN extractors SET NOT NULL;

-- Rows from before 0009 were read by the only extractors then.
UPDATE documents SET extractor = CASE media_type WHEN 'text/markdown' THEN 'markdown/1' WHEN 'text/plain' THEN 'text/1' ELSE '' END;
