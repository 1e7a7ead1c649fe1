\set id random(1, 5000)
INSERT INTO items SELECT g, 'bulk item ' || g || ' ' || md5(g::text)
FROM generate_series(:id, :id + 20) g
ON CONFLICT (id) DO NOTHING;
