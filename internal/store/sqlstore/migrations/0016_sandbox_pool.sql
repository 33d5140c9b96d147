-- 0016: the warm pool fed from a snapshot that a sandbox was made for (the
-- snapshot's id); '' for every other sandbox, members of a profile's
-- plain pool included. A pool claim takes only its own pool's members.

ALTER TABLE sandboxes ADD COLUMN pool TEXT NOT NULL DEFAULT '';
