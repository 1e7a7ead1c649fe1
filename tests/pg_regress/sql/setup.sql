CREATE EXTENSION pg_minhash;
-- The files after this one make band tables of format 2 where they do not say (format 1 is the
-- default; format2.sql tests the setting).
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET pg_minhash.default_format = 2', current_database());
END $$;
-- try(q): runs the statement q and returns 'ok', or its SQLSTATE and message if it fails (the
-- files that check error paths share it; it runs as whoever calls it).
CREATE FUNCTION public.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
