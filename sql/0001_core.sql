-- 0001: the manifest, documents and blocks with their verbatim bodies.
-- Every row here is derived from the blob store and can be rebuilt from it.

-- One row (id = 1): what built this index. index.Open compares it with the
-- configuration and refuses a mismatch.
CREATE TABLE manifest (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version  INTEGER   NOT NULL,
    embedder_model  VARCHAR   NOT NULL,  -- embedder model id; 'none': no dense vectors
    embedder_dim    INTEGER   NOT NULL,  -- vector dimension; 0 with 'none'
    chunker         VARCHAR   NOT NULL,  -- name and parameters, e.g. 'default(max_bytes=1500)'
    analyzer        VARCHAR   NOT NULL,  -- name/version, e.g. 'simple/1'
    contextualize   VARCHAR   NOT NULL,  -- 'structural' or 'off'
    escurel_version VARCHAR   NOT NULL,  -- the binary that created or last upgraded the index
    created_at      TIMESTAMP NOT NULL,  -- UTC
    updated_at      TIMESTAMP NOT NULL   -- UTC
);

-- A copy of each document record (blobstore documents/<doc_id>.json).
CREATE TABLE documents (
    doc_id      VARCHAR   PRIMARY KEY,  -- 32 hex digits: sha256 of the source, truncated
    source      VARCHAR   NOT NULL,     -- where the bytes came from (absolute path or URI)
    media_type  VARCHAR   NOT NULL,     -- 'text/markdown' or 'text/plain'
    title       VARCHAR   NOT NULL,
    sensitivity VARCHAR   NOT NULL,     -- 'public', 'internal' or 'restricted'
    blob_id     VARCHAR   NOT NULL,     -- 'sha256:<64 hex>', the raw bytes in the blob store
    language    VARCHAR   NOT NULL,     -- BCP 47 tag, e.g. 'en'
    ingested_at TIMESTAMP NOT NULL      -- UTC, from the document record
);

-- Blocks: byte spans of a document's text. For Markdown and plain text the
-- text is the blob itself, so blob[byte_start:byte_end] = body, exactly.
CREATE SEQUENCE block_ids START 1;
CREATE TABLE blocks (
    block_id   BIGINT  PRIMARY KEY,  -- from the block_ids sequence, never reused
    doc_id     VARCHAR NOT NULL,
    ord        INTEGER NOT NULL,     -- position in the document, from 0
    body       VARCHAR NOT NULL,     -- verbatim
    byte_start BIGINT  NOT NULL,     -- inclusive, bytes
    byte_end   BIGINT  NOT NULL      -- exclusive, bytes
);
