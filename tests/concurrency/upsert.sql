\set id random(1, 5000)
INSERT INTO items VALUES (:id, 'upserted item ' || :id || ' ' || md5(random()::text))
ON CONFLICT (id) DO UPDATE SET body = excluded.body;
