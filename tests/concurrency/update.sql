\set id random(1, 5000)
UPDATE items SET body = body || ' edited ' || left(md5(random()::text), 6) WHERE id = :id;
UPDATE items SET tag = 'touched' WHERE id = :id;
