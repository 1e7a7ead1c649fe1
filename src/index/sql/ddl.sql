-- DDL on indexed tables (src/index/sql/, part 3 of 4): the two event triggers.

-- The two event triggers: DDL on indexed tables, as whoever runs the DDL (src/index/manage/ddl.rs
-- says what each refuses and what it does).
-- minhash_ddl_altered (ddl_command_end, ALTER and CREATE TABLE and TRIGGER): the id and text
-- columns the catalog names keep their names and types; the band table follows its table's
-- owner and persistence; an indexed table takes no part in inheritance; an indexed
-- partitioned table's index follows its partition tree; the sync triggers keep their names.
-- minhash_ddl_dropped (sql_drop): a dropped table takes its index along, and a dropped
-- partition its rows' band rows; a band table dropped on its own takes its index along.
-- (SET search_path: what the function sets for the rest of the transaction, the tables dropped
-- with their index, outlives the call, as it did in PL/pgSQL.)
CREATE FUNCTION minhash_internal._minhash_ddl() RETURNS event_trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_ddl_wrapper';

CREATE EVENT TRIGGER minhash_ddl_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION minhash_internal._minhash_ddl();
CREATE EVENT TRIGGER minhash_ddl_dropped ON sql_drop
    EXECUTE FUNCTION minhash_internal._minhash_ddl();

-- minhash_flag_created (ddl_command_end of CREATE TRIGGER, CREATE TABLE and ALTER TABLE): a
-- minhash_flag_duplicate trigger is checked as it is made (CREATE [OR REPLACE] TRIGGER, its
-- clones on partitions, ATTACH PARTITION), with the checks and errors of its first row
-- (src/index/write/flag.rs).
CREATE FUNCTION minhash_internal._minhash_flag_created() RETURNS event_trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_flag_created_wrapper';
CREATE EVENT TRIGGER minhash_flag_created ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION minhash_internal._minhash_flag_created();
