-- 0007: dense vectors as fixed-size FLOAT[dim] arrays, one table per
-- embedding set. An embedding set is the vectors of one model identity
-- (embed.Spec.Identity: model, dimension, query and document prefixes) for
-- the index's blocks; its vectors live in the table vectors_<set_id>,
--     (block_id BIGINT PRIMARY KEY, vector FLOAT[<dim>] NOT NULL),
-- which index.Open creates, as the dimension is known only then. Each
-- vector embeds context || '\n' || body (the body alone when the context is
-- empty), scaled to unit length.
--
-- The list-typed embeddings table of 0004 is dropped: its rows are derived,
-- and Open embeds every block that lacks a vector in the active set.
CREATE TABLE embedding_sets (
    set_id     INTEGER   PRIMARY KEY,
    name       VARCHAR   NOT NULL UNIQUE,  -- embed.Spec.Identity().String(), e.g. 'hash/384'
    model      VARCHAR   NOT NULL,         -- e.g. 'hash', 'openai:text-embedding-3-small'
    dim        INTEGER   NOT NULL,
    created_at TIMESTAMP NOT NULL          -- UTC
);
DROP TABLE embeddings;

-- The embedder's whole spec (embed.Spec.String(): identity plus how to reach
-- the model), so that a later open without an --embedder reaches the same
-- server. '' in files from before 0007: the spec is embedder_model/dim.
ALTER TABLE manifest ADD COLUMN embedder_spec VARCHAR DEFAULT '';
ALTER TABLE manifest ALTER COLUMN embedder_spec SET NOT NULL;
