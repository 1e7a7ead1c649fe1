\set id random(1, 5000)
INSERT INTO items VALUES (:id, 'item ' || :id || ' ' || md5(:id::text) || ' ' || md5(random()::text))
ON CONFLICT (id) DO NOTHING;
