-- 0030's last step: the new index takes rule D09's index's name (a rename
-- takes a lock that blocks neither reads nor writes).
ALTER INDEX sessions_not_closed_per_robot RENAME TO sessions_one_open_per_robot;
