-- 0010: reserved for the stable block ids branch (issue 14), which brings
-- its own 0010; this placeholder keeps the numbering without gaps until
-- the branches are merged, and is dropped then.
SELECT 1;
