\set id random(1, 5000)
BEGIN;
INSERT INTO items VALUES (:id + 200000, 'never committed') ON CONFLICT (id) DO NOTHING;
UPDATE items SET body = 'never committed either' WHERE id = :id;
DELETE FROM items WHERE id = :id + 1;
ROLLBACK;
