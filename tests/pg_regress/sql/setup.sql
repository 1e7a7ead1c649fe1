CREATE EXTENSION pg_minhash;
-- try(q): runs the statement q and returns 'ok', or its SQLSTATE and message if it fails (the
-- files that check error paths share it; it runs as whoever calls it).
CREATE FUNCTION public.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
