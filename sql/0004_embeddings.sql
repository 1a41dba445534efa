-- 0004: dense vectors, one per (embedding set, block). An embedding set is
-- '<model>/<dim>' (embed.Spec); the manifest names the one this index serves.
-- The embedded text is context + '\n' + body, or body alone when the context
-- is empty.
CREATE TABLE embeddings (
    embedding_set VARCHAR NOT NULL,
    block_id      BIGINT  NOT NULL,
    vector        FLOAT[] NOT NULL,  -- dim float32 values, unit length or zero
    PRIMARY KEY (embedding_set, block_id)
);
