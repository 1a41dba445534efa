-- 0008: small-to-big. A block made by the parent_child or sentence_window
-- chunker carries its window: the text the generator should get around the
-- block (its parent section, or the sentences around it), which search
-- returns as prompt_text while the citation stays on the block. These
-- columns never feed ranking. '' for blocks without a window (the default
-- chunker, and rows from before 0008).
ALTER TABLE blocks ADD COLUMN parent_id VARCHAR DEFAULT '';      -- '<doc_id>/p<N>' (parent_child); '' otherwise
ALTER TABLE blocks ALTER COLUMN parent_id SET NOT NULL;
ALTER TABLE blocks ADD COLUMN heading VARCHAR DEFAULT '';        -- the parent's innermost heading
ALTER TABLE blocks ALTER COLUMN heading SET NOT NULL;
ALTER TABLE blocks ADD COLUMN window_text VARCHAR DEFAULT '';    -- text[window_start:window_end], verbatim
ALTER TABLE blocks ALTER COLUMN window_text SET NOT NULL;
ALTER TABLE blocks ADD COLUMN parent_locator VARCHAR DEFAULT ''; -- JSON {"byte_start","byte_end","paragraph_start","paragraph_end"}
ALTER TABLE blocks ALTER COLUMN parent_locator SET NOT NULL;
