\set id random(1, 5000)
-- a lookup, then an insert, in one transaction: it holds the band table while it waits to write
BEGIN;
SELECT lookup(:id);
INSERT INTO items VALUES (:id + 300000, 'looked up ' || :id || ' ' || md5(random()::text))
ON CONFLICT (id) DO NOTHING;
END;
