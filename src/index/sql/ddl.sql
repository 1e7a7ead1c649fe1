-- DDL on indexed tables (src/index/sql/, part 4 of 5): the two event triggers.

-- After DDL on the partition tree of the indexed partitioned table of `cfg` (CREATE TABLE ...
-- PARTITION OF, ATTACH PARTITION, DETACH PARTITION, DROP TABLE): a table that joined the tree
-- gets the sync triggers and its rows their band rows; a table that left it loses both (the
-- band rows of its rows, or, when it was dropped, the band rows whose id no row of the table
-- has any more: one anti-join of the band table). `dropped`: the OIDs of the tables dropped.
-- The catalog row then lists the tree as it is. As whoever runs the DDL, who owns the
-- partitioned table (or the band rows are left with a WARNING, see below).
CREATE FUNCTION minhash_internal._minhash_tree_changed(cfg @extschema@.minhash_indexes, dropped oid[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tree regclass[] := ARRAY(SELECT minhash_internal._minhash_partitions(cfg.tbl));
    kept oid[] := coalesce(cfg.partitions::oid[], '{}');
    member regclass;
BEGIN
    IF tree::oid[] = kept THEN
        RETURN;
    END IF;
    -- joined: parents before their partitions
    FOR member IN SELECT t FROM unnest(tree) WITH ORDINALITY u(t, n) WHERE t <> ALL (kept) ORDER BY n LOOP
        PERFORM minhash_internal._minhash_sync_triggers(member, true);
        IF (SELECT c.relkind FROM pg_class c WHERE c.oid = member) = 'r' THEN
            PERFORM minhash_internal._minhash_backfill(cfg.band_table, member);
        END IF;
    END LOOP;
    -- left, still there (detached): the band rows of their rows go. The list of the tree the
    -- catalog keeps is input (the table's owner may write it): a table it names is touched only
    -- if it has the id column, belongs to a role whose rights the index's owner has, and no
    -- index covers it now (as an indexed table or a partition of one).
    FOR member IN
        SELECT k::regclass FROM unnest(kept) k JOIN pg_class c ON c.oid = k
        WHERE k <> ALL (tree::oid[]) AND k <> ALL (coalesce(dropped, '{}'))
          AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = k AND a.attname = cfg.id_column
                      AND a.attnum > 0 AND NOT a.attisdropped)
          AND pg_has_role((SELECT t.relowner FROM pg_class t WHERE t.oid = cfg.tbl), c.relowner, 'USAGE')
          AND NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i
                          WHERE i.tbl = coalesce(pg_partition_root(k), k))
    LOOP
        IF (SELECT c.relkind FROM pg_class c WHERE c.oid = member) = 'r' THEN
            PERFORM minhash_internal._minhash_as_owner(cfg.tbl, format(
                'WITH gone AS (%s), d AS (DELETE FROM %s b USING gone g
                     WHERE b.%s OPERATOR(pg_catalog.=) g.key AND b.id OPERATOR(pg_catalog.=) g.id
                     RETURNING 1)
                 SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                minhash_internal._minhash_band_rows_sql(cfg, member::text), cfg.band_table,
                -- (of format 2, the row whose first band's key is the gone row's)
                CASE WHEN cfg.format = 1 THEN 'key' ELSE 'key1' END));
        END IF;
        PERFORM minhash_internal._minhash_sync_triggers(member, false);
    END LOOP;
    -- left, dropped: their rows are gone with them
    IF kept && dropped THEN
        BEGIN
            PERFORM minhash_internal._minhash_as_owner(cfg.tbl, format(
                'WITH d AS (DELETE FROM %s b WHERE NOT EXISTS (SELECT FROM %s t
                     WHERE t.%I OPERATOR(pg_catalog.=) b.id) RETURNING 1)
                 SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                cfg.band_table, cfg.tbl, cfg.id_column));
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'the minhash index of % keeps the band rows of the dropped partition: %',
                cfg.tbl, SQLERRM
                USING HINT = format('Its owner can remove them with minhash_index_rebuild(%L).', cfg.tbl);
        END;
    END IF;
    UPDATE @extschema@.minhash_indexes i SET partitions = tree WHERE i.band_table = cfg.band_table;
END $$;

-- The two event triggers: DDL on indexed tables. Runs as whoever runs the DDL, on every
-- ALTER TABLE and every DROP, so it looks only at the catalog rows of the tables involved.
--
-- minhash_ddl_altered (ddl_command_end, ALTER and CREATE TABLE and TRIGGER): the catalog names the
-- id and text columns, so an ALTER TABLE that drops, renames or retypes either of them is
-- refused (it would make every later INSERT and UPDATE fail); the index has to be dropped
-- first. A new owner of the table becomes the owner of its band table too. An indexed table
-- may not become a parent, child or partition (CREATE TABLE ... INHERITS, ALTER TABLE ...
-- INHERIT, ATTACH PARTITION): its triggers would not see the other tables' rows. After an
-- ALTER TABLE of the catalog itself, band tables get their dependencies back (_minhash_relink).
-- An indexed partitioned table's index follows its partition tree (_minhash_tree_changed).
-- On CREATE TRIGGER and ALTER TRIGGER it refuses to rename the sync triggers of an indexed
-- table, and to make them on a table made again under the name of an indexed table dropped in
-- the same transaction (how Citus converts tables: README, "Scaling out with Citus").
--
-- minhash_ddl_dropped (sql_drop): a dropped table takes its index along, as it takes its
-- ordinary indexes: the band table (dropped with the table through its dependency, or here if
-- that is missing) and the catalog row. A band table the dropping role may not drop is left
-- behind with a WARNING rather than failing the DROP. A dropped partition of an indexed table
-- takes its rows' band rows along (_minhash_tree_changed). The band table of a Citus table
-- cannot be dropped on its own; any other band table dropped on its own takes its index along.
CREATE FUNCTION minhash_internal._minhash_ddl()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes;
    bad name;
    table_owner oid;
    dropped_name text;
    inherited regclass;
    band_id regtype;
    problem text;
    persistence "char";
BEGIN
    IF NOT has_schema_privilege('@extschema@'::regnamespace, 'USAGE') THEN
        RETURN;  -- a role that cannot reach the extension cannot have made an index
    END IF;
    IF TG_EVENT = 'ddl_command_end' AND TG_TAG IN ('CREATE TRIGGER', 'ALTER TRIGGER') THEN
        -- A sync trigger of an indexed table fires by its name: a new name would leave the
        -- table unindexed (Citus's citus_add_local_table_to_metadata renames the table's
        -- triggers so, as it turns the table into a shard of a Citus local table).
        SELECT t.tgrelid INTO inherited
        FROM pg_event_trigger_ddl_commands() c JOIN pg_trigger t ON t.oid = c.objid
        WHERE TG_TAG = 'ALTER TRIGGER' AND c.classid = 'pg_trigger'::regclass
          AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
          AND EXISTS (SELECT FROM @extschema@.minhash_indexes i
                      WHERE i.tbl = coalesce(pg_partition_root(t.tgrelid), t.tgrelid))
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'the triggers of the minhash index of table % cannot be renamed', inherited
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'citus_add_local_table_to_metadata() and foreign keys between a '
                               'reference table and a local table rename them so.',
                      HINT = 'Drop the index first with minhash_index_drop(), and create it again '
                             'afterwards.';
        END IF;
        -- A table dropped with its index in this transaction, made again under its name with
        -- its sync triggers, as Citus's undistribute_table(), alter_distributed_table() and
        -- alter_table_set_access_method() do: the triggers would fire with no index.
        SELECT t.tgrelid INTO inherited
        FROM pg_event_trigger_ddl_commands() c JOIN pg_trigger t ON t.oid = c.objid
        WHERE TG_TAG = 'CREATE TRIGGER' AND c.classid = 'pg_trigger'::regclass
          AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
          AND (pg_identify_object('pg_class'::regclass, t.tgrelid, 0)).identity
              = ANY (coalesce(nullif(current_setting('minhash_internal.dropped_tables', true), ''), '{}')::text[])
          AND NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i
                          WHERE i.tbl = coalesce(pg_partition_root(t.tgrelid), t.tgrelid))
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'table % was made again without the minhash index it had', inherited
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'undistribute_table(), alter_distributed_table() and '
                               'alter_table_set_access_method() of Citus make a table again '
                               'so, and do not carry a minhash index over.',
                      HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                    'create it again afterwards.', inherited);
        END IF;
        RETURN;
    END IF;
    IF TG_EVENT = 'ddl_command_end' THEN
        IF '@extschema@.minhash_indexes'::regclass IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c) THEN
            PERFORM minhash_internal._minhash_relink();
        END IF;
        -- CREATE TABLE ... INHERITS, ALTER TABLE ... INHERIT and ATTACH PARTITION
        SELECT i.tbl INTO inherited FROM @extschema@.minhash_indexes i JOIN pg_class c ON c.oid = i.tbl
        WHERE c.relispartition
           OR c.relkind = 'r' AND EXISTS (SELECT FROM pg_inherits h
                                          WHERE h.inhrelid = i.tbl OR h.inhparent = i.tbl)
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'table % has a minhash index and cannot take part in inheritance or become a partition', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = format('Drop the index first with minhash_index_drop(%L).', inherited);
        END IF;
        -- (CREATE TABLE ... PARTITION OF names the partition, ATTACH and DETACH its parent)
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE i.partitions IS NOT NULL
              AND i.tbl IN (SELECT coalesce(pg_partition_root(c.objid), c.objid)
                            FROM pg_event_trigger_ddl_commands() c
                            WHERE c.classid = 'pg_class'::regclass)
        LOOP
            PERFORM minhash_internal._minhash_tree_changed(cfg, NULL);
        END LOOP;
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE i.tbl IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c
                            WHERE c.classid = 'pg_class'::regclass)
        LOOP
            SELECT a.atttypid INTO band_id FROM pg_attribute a
            WHERE a.attrelid = cfg.band_table AND a.attname = 'id' AND NOT a.attisdropped;
            SELECT CASE WHEN NOT coalesce(bool_or(a.attname = cfg.id_column AND
                             CASE WHEN band_id = 'bigint'::regtype
                                  THEN a.atttypid IN ('smallint'::regtype, 'integer'::regtype,
                                                      'bigint'::regtype)
                                  ELSE a.atttypid = band_id END), false)
                        THEN cfg.id_column
                        WHEN cfg.text_column IS NOT NULL
                             AND NOT coalesce(bool_or(a.attname = cfg.text_column AND a.atttypid IN
                             ('text'::regtype, 'character varying'::regtype)
                             AND a.attgenerated <> 'v'), false)
                        THEN cfg.text_column END
            INTO bad
            FROM pg_attribute a WHERE a.attrelid = cfg.tbl AND a.attnum > 0 AND NOT a.attisdropped;
            IF bad IS NOT NULL THEN
                RAISE EXCEPTION 'the minhash index of table % reads column "%"', cfg.tbl, bad
                    USING ERRCODE = 'dependent_objects_still_exist',
                          DETAIL = format('Its id column "%s" must keep its type (%s) and its '
                                          'text column "%s" stay text or character varying '
                                          '(not virtual generated), under these names.',
                                          cfg.id_column,
                                          CASE WHEN band_id = 'bigint'::regtype
                                               THEN 'smallint, integer or bigint'
                                               ELSE format_type(band_id, NULL) END,
                                          cfg.text_column),
                          HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                        'create it again afterwards.', cfg.tbl);
            END IF;
            -- a text expression must still read the same columns, with the same meaning
            IF cfg.text_expression IS NOT NULL THEN
                BEGIN
                    problem := CASE WHEN minhash_internal._minhash_text_expression(cfg.tbl, cfg.text_expression)
                                         IS DISTINCT FROM cfg.text_expression
                                    THEN 'would read differently' END;
                EXCEPTION WHEN OTHERS THEN
                    problem := 'fails: ' || SQLERRM;
                END;
                IF problem IS NOT NULL THEN
                    RAISE EXCEPTION 'the minhash index of table % reads columns this changes', cfg.tbl
                        USING ERRCODE = 'dependent_objects_still_exist',
                              DETAIL = format('Its text expression %s %s.', cfg.text_expression, problem),
                              HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                            'create it again afterwards.', cfg.tbl);
                END IF;
            END IF;
            -- ALTER TABLE ... OWNER TO: the band table follows its table's owner (the sync
            -- trigger writes it as that owner and refuses a band table of anyone else)
            SELECT t.relowner INTO table_owner FROM pg_class t WHERE t.oid = cfg.tbl;
            IF EXISTS (SELECT FROM pg_class b WHERE b.oid = cfg.band_table
                       AND b.relowner <> table_owner) THEN
                EXECUTE format('ALTER TABLE %s OWNER TO %I', cfg.band_table,
                               pg_get_userbyid(table_owner));
            END IF;
            -- ALTER TABLE ... SET LOGGED / SET UNLOGGED: so does the band table (a crash then
            -- empties both or neither)
            SELECT t.relpersistence INTO persistence FROM pg_class t
            WHERE t.oid = cfg.tbl AND t.relkind = 'r'
              AND (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NULL;
            IF EXISTS (SELECT FROM pg_class b WHERE b.oid = cfg.band_table
                       AND b.relpersistence <> persistence) THEN
                EXECUTE format('ALTER TABLE %s SET %s', cfg.band_table,
                               CASE persistence WHEN 'u' THEN 'UNLOGGED' ELSE 'LOGGED' END);
            END IF;
        END LOOP;
        -- A band table keeps its table's persistence, and so does every table of an indexed
        -- partition tree (a crash empties an unlogged partition, whose band rows a logged band
        -- table would keep).
        SELECT i.band_table INTO inherited FROM @extschema@.minhash_indexes i
        JOIN pg_class t ON t.oid = i.tbl JOIN pg_class b ON b.oid = i.band_table
        WHERE i.band_table IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c
                               WHERE c.classid = 'pg_class'::regclass)
          AND t.relkind IN ('r', 'p') AND b.relpersistence <> t.relpersistence
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'band table % must keep the persistence of its table', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'ALTER TABLE ... SET LOGGED or SET UNLOGGED the indexed table: its band table follows.';
        END IF;
        SELECT p.relid INTO inherited FROM @extschema@.minhash_indexes i
        JOIN pg_class b ON b.oid = i.band_table
        CROSS JOIN LATERAL pg_partition_tree(i.tbl) p JOIN pg_class c ON c.oid = p.relid
        WHERE i.partitions IS NOT NULL AND c.relpersistence <> b.relpersistence
          AND i.tbl IN (SELECT coalesce(pg_partition_root(x.objid), x.objid)
                        FROM pg_event_trigger_ddl_commands() x WHERE x.classid = 'pg_class'::regclass)
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'partition % of an indexed table must have the persistence of its band table', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Every table of an indexed partition tree is logged, or every one unlogged, like the partitioned table.';
        END IF;
        -- The sync triggers on the shards of a Citus table name it and its band tables
        -- (_minhash_citus_args): a new name or schema for either would leave them naming
        -- what is gone.
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
                          WHERE c.classid = 'pg_class'::regclass AND c.objid IN (i.tbl, i.band_table))
              AND (minhash_internal._minhash_citus_table(i.tbl)).kind IS NOT NULL
              AND minhash_internal._minhash_citus_args(i.tbl) IS DISTINCT FROM
                  (SELECT minhash_internal._minhash_trigger_args(t.oid) FROM pg_trigger t
                   WHERE t.tgrelid = i.tbl AND t.tgname = 'minhash_sync_insert')
        LOOP
            RAISE EXCEPTION 'Citus table % and its minhash band table % cannot be renamed or moved',
                cfg.tbl, cfg.band_table
                USING ERRCODE = 'feature_not_supported',
                      HINT = format('Drop the index first with minhash_index_drop(%L), and create it '
                                    'again afterwards.', cfg.tbl);
        END LOOP;
        RETURN;
    END IF;
    -- A band table dropped without its table takes its index along, as DROP INDEX would
    -- (pg_restore --clean drops the band table before its table): its sync triggers and
    -- catalog row go, so writes to the table go on unindexed (a duplicate trigger that uses
    -- the index refuses the drop, as minhash_index_drop does). The band table of a Citus
    -- table goes only with its index or its table: Citus's table conversions
    -- (alter_distributed_table(), undistribute_table()) of a band table alone would leave
    -- its shard triggers naming a table that is gone.
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.band_table IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                               WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
          AND EXISTS (SELECT FROM pg_class c WHERE c.oid = i.tbl)
          AND i.tbl NOT IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                            WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
            RAISE EXCEPTION 'the band table of the minhash index of Citus table % cannot be dropped or converted on its own', cfg.tbl
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = format('Drop the index with minhash_index_drop(%L).', cfg.tbl);
        END IF;
        SELECT d.object_name INTO dropped_name FROM pg_event_trigger_dropped_objects() d
        WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.band_table AND d.objsubid = 0;
        SELECT t.tgname INTO bad FROM pg_trigger t
        WHERE t.tgrelid = cfg.tbl AND t.tgfoid = '@extschema@.minhash_flag_duplicate()'::regprocedure
          AND coalesce(nullif((minhash_internal._minhash_trigger_args(t.oid))[4], ''), dropped_name)
              = dropped_name
        LIMIT 1;
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION 'cannot drop table % because trigger % on table % uses its minhash index',
                dropped_name, bad, cfg.tbl
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = format('Drop the trigger first, or the index and the trigger with '
                                    'minhash_index_drop(%L, cascade => true).', cfg.tbl);
        END IF;
        RAISE NOTICE 'drop cascades to the minhash index of table %', cfg.tbl;
        PERFORM @extschema@.minhash_index_drop(cfg.band_table);
    END LOOP;
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.tbl IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                        WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        -- (for the CREATE TRIGGER check above, till the end of the transaction)
        PERFORM set_config('minhash_internal.dropped_tables',
            (coalesce(nullif(current_setting('minhash_internal.dropped_tables', true), ''), '{}')::text[]
             || (SELECT d.object_identity FROM pg_event_trigger_dropped_objects() d
                 WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.tbl AND d.objsubid = 0))::text,
            true);
        BEGIN
            PERFORM minhash_internal._minhash_drop_objects(cfg.band_table);
        EXCEPTION WHEN insufficient_privilege THEN
            -- (the dropped table's regclass prints as a bare OID)
            SELECT d.object_identity INTO dropped_name FROM pg_event_trigger_dropped_objects() d
            WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.tbl AND d.objsubid = 0;
            RAISE WARNING 'the minhash index of dropped table % was left behind: %',
                dropped_name, SQLERRM
                USING HINT = format('Its owner can drop %s.', cfg.band_table);
        END;
        DELETE FROM @extschema@.minhash_indexes i WHERE i.band_table = cfg.band_table;
    END LOOP;
    -- (the catalog's partition list is input, and may name any table: what it leads to here is
    -- its own index's cleanup, which never fails anyone's DROP)
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.partitions::oid[] && ARRAY(SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                                         WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
          -- (a partition of an indexed tree carries the sync triggers, dropped with it)
          AND EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                      WHERE d.classid = 'pg_trigger'::regclass
                        AND d.object_identity LIKE 'minhash\_sync\_insert on %')
    LOOP
        BEGIN
            PERFORM minhash_internal._minhash_tree_changed(cfg, ARRAY(
                SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0));
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'the minhash index of % was not brought up to date with its partitions: %',
                cfg.tbl, SQLERRM
                USING HINT = format('Its owner can make it exact with minhash_index_rebuild(%L).', cfg.tbl);
        END;
    END LOOP;
END $$;

CREATE EVENT TRIGGER minhash_ddl_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION minhash_internal._minhash_ddl();
CREATE EVENT TRIGGER minhash_ddl_dropped ON sql_drop
    EXECUTE FUNCTION minhash_internal._minhash_ddl();

-- minhash_flag_created (ddl_command_end of CREATE TRIGGER, CREATE TABLE and ALTER TABLE): a
-- minhash_flag_duplicate trigger is checked as it is made (CREATE [OR REPLACE] TRIGGER, its
-- clones on partitions, ATTACH PARTITION), with the checks and errors of its first row
-- (src/index/flag.rs).
CREATE FUNCTION minhash_internal._minhash_flag_created() RETURNS event_trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_flag_created_wrapper';
CREATE EVENT TRIGGER minhash_flag_created ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION minhash_internal._minhash_flag_created();
