\set id random(1, 5000)
-- moving a row to another id; a concurrent move of the same target is allowed to lose
DO $$ BEGIN
    UPDATE items SET id = id + 100000 WHERE id = :id;
EXCEPTION WHEN unique_violation OR deadlock_detected THEN NULL;
END $$;
