\set id random(1, 5000)
DELETE FROM items WHERE id = :id OR id = :id + 100000;
