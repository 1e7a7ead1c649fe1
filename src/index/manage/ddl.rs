//! DDL on indexed tables: the function of the two event triggers `minhash_ddl_altered` and
//! `minhash_ddl_dropped` (src/index/sql/ddl.sql), which runs as whoever runs the DDL, on every
//! ALTER TABLE and every DROP, so it looks only at the catalog rows of the tables involved.
//!
//! `minhash_ddl_altered` (`ddl_command_end` of ALTER and CREATE TABLE and TRIGGER): the catalog
//! names the id and text columns, so an ALTER TABLE that drops, renames or retypes either of
//! them is refused (it would make every later INSERT and UPDATE fail); the index has to be
//! dropped first. A new owner of the table becomes the owner of its band table too, and so
//! does its persistence. An indexed table may not become a parent, child or partition (CREATE
//! TABLE ... INHERITS, ALTER TABLE ... INHERIT, ATTACH PARTITION): its triggers would not see
//! the other tables' rows. After an ALTER TABLE of the catalog itself, band tables get their
//! dependencies back ([`relink`]). An indexed partitioned table's index follows its partition
//! tree ([`tree_changed`]). On CREATE TRIGGER and ALTER TRIGGER it refuses to rename the sync
//! triggers of an indexed table, and to make them on a table made again under the name of an
//! indexed table dropped in the same transaction (how Citus converts tables: README, "Scaling
//! out with Citus").
//!
//! `minhash_ddl_dropped` (`sql_drop`): a dropped table takes its index along, as it takes its
//! ordinary indexes: the band table (dropped with the table through its dependency, or here if
//! that is missing) and the catalog row. A band table the dropping role may not drop is left
//! behind with a WARNING rather than failing the DROP. A dropped partition of an indexed table
//! takes its rows' band rows along ([`tree_changed`]). The band table of a Citus table cannot
//! be dropped on its own; any other band table dropped on its own takes its index along.
//!
//! The function is declared with `SET search_path = pg_catalog, pg_temp`, as its PL/pgSQL was:
//! the regclass names in its messages print as they did, and the list of dropped tables it sets
//! for the rest of the transaction outlives the call. What it reaches of the other SQL of the
//! index (the sync triggers, backfill, `_minhash_as_owner`, `minhash_index_drop`) it calls
//! through SPI by qualified names, as the PL/pgSQL did.

use std::ffi::CStr;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::pg::error::{notice, raise, raise_detailed};
use crate::pg::names::quote_literal;

use super::{extension_schema, query, regclass_text, run, statement, CatalogRow};
use crate::index::def::restore::relink;
use crate::index::run::subxact::{catching, others};

/// The setting that lists, till the end of the transaction, the tables dropped with their
/// index (as `pg_identify_object` names them), for the CREATE TRIGGER check.
const DROPPED_TABLES: &str = "minhash_internal.dropped_tables";

/// The relations of the command that fires `minhash_ddl_altered`, as an SQL subquery.
const COMMAND_RELATIONS: &str = "SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c
     WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass";

/// The relations the command that fires `minhash_ddl_dropped` dropped, as an SQL subquery.
const DROPPED_RELATIONS: &str =
    "SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objsubid OPERATOR(pg_catalog.=) 0";

/// Event trigger function of `minhash_ddl_altered` and `minhash_ddl_dropped` (see the module
/// documentation).
// (created in schema minhash_internal by src/index/sql/ddl.sql)
#[pg_extern(sql = false)]
fn _minhash_ddl(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: the call's own `fcinfo`; a context node's tag is read only when there is one,
    // and an EventTriggerData's event and tag are set by the event trigger that fires.
    let event = unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || !pgrx::is_a(context, pg_sys::NodeTag::T_EventTriggerData) {
            raise(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "_minhash_ddl() must be fired as an event trigger",
                None,
            );
        }
        let data = context.cast::<pg_sys::EventTriggerData>();
        (
            CStr::from_ptr((*data).event).to_string_lossy().into_owned(),
            CStr::from_ptr(pg_sys::GetCommandTagName((*data).tag))
                .to_string_lossy()
                .into_owned(),
        )
    };
    let schema = extension_schema(fcinfo);
    // (a role that cannot reach the extension cannot have made an index)
    let reachable = statement::<bool>(
        "SELECT pg_catalog.has_schema_privilege($1::pg_catalog.regnamespace, 'USAGE')",
        &[schema.as_str().into()],
    );
    if reachable != Some(true) {
        return;
    }
    match (event.0.as_str(), event.1.as_str()) {
        ("ddl_command_end", tag @ ("CREATE TRIGGER" | "ALTER TRIGGER")) => {
            trigger_made(&schema, tag)
        }
        ("ddl_command_end", _) => altered(&schema),
        _ => dropped(&schema),
    }
}

/// CREATE TRIGGER and ALTER TRIGGER.
fn trigger_made(schema: &str, tag: &str) {
    if tag == "ALTER TRIGGER" {
        // A sync trigger of an indexed table fires by its name: a new name would leave the
        // table unindexed (Citus's citus_add_local_table_to_metadata renames the table's
        // triggers so, as it turns the table into a shard of a Citus local table).
        let renamed = sync_trigger_table(&format!("EXISTS ({})", indexed(schema)));
        if let Some(tbl) = renamed {
            raise_detailed(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("the triggers of the minhash index of table {tbl} cannot be renamed"),
                "citus_add_local_table_to_metadata() and foreign keys between a reference table \
                 and a local table rename them so."
                    .into(),
                "Drop the index first with minhash_index_drop(), and create it again afterwards."
                    .into(),
            );
        }
    } else {
        // A table dropped with its index in this transaction, made again under its name with
        // its sync triggers, as Citus's undistribute_table(), alter_distributed_table() and
        // alter_table_set_access_method() do: the triggers would fire with no index.
        let remade = sync_trigger_table(&format!(
            "(pg_catalog.pg_identify_object('pg_catalog.pg_class'::pg_catalog.regclass,
                                            t.tgrelid, 0)).identity
                 OPERATOR(pg_catalog.=) ANY ({})
             AND NOT EXISTS ({})",
            dropped_tables_sql(),
            indexed(schema)
        ));
        if let Some(tbl) = remade {
            raise_detailed(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("table {tbl} was made again without the minhash index it had"),
                "undistribute_table(), alter_distributed_table() and \
                 alter_table_set_access_method() of Citus make a table again so, and do not \
                 carry a minhash index over."
                    .into(),
                drop_first(&tbl),
            );
        }
    }
}

/// The table (as a regclass prints) of the first sync trigger the command made or renamed that
/// `condition` (over trigger `t`) accepts.
fn sync_trigger_table(condition: &str) -> Option<String> {
    statement(
        &format!(
            "SELECT t.tgrelid::pg_catalog.regclass::pg_catalog.text
             FROM pg_catalog.pg_event_trigger_ddl_commands() c
             JOIN pg_catalog.pg_trigger t ON t.oid OPERATOR(pg_catalog.=) c.objid
             WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass
               AND t.tgfoid OPERATOR(pg_catalog.=)
                   'minhash_internal._minhash_sync()'::pg_catalog.regprocedure
               AND {condition}
             LIMIT 1"
        ),
        &[],
    )
}

/// The catalog rows of the index of the table of trigger `t` (or of the root of its partition
/// tree), as an SQL subquery.
fn indexed(schema: &str) -> String {
    format!(
        "SELECT FROM {schema}.minhash_indexes i
         WHERE i.tbl OPERATOR(pg_catalog.=)
               coalesce(pg_catalog.pg_partition_root(t.tgrelid), t.tgrelid)"
    )
}

/// The hint of an error that refuses DDL on an indexed table.
fn drop_first(tbl: &str) -> String {
    format!(
        "Drop the index first with minhash_index_drop({}), and create it again afterwards.",
        quote_literal(tbl)
    )
}

/// [`DROPPED_TABLES`] as a text[] expression (empty when unset).
fn dropped_tables_sql() -> String {
    let setting = format!("pg_catalog.current_setting('{DROPPED_TABLES}', true)");
    format!(
        "coalesce(CASE WHEN {setting} OPERATOR(pg_catalog.<>) '' THEN {setting} END, \
         '{{}}')::pg_catalog.text[]"
    )
}

/// A WARNING with a hint (SQLSTATE 01000, as PL/pgSQL's `RAISE WARNING`).
fn warning(message: String, hint: String) {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_WARNING, message, "pg_minhash")
        .set_hint(hint)
        .report(PgLogLevel::WARNING);
}

/// The other commands of `minhash_ddl_altered`: ALTER TABLE and CREATE TABLE.
fn altered(schema: &str) {
    let catalog_altered = statement::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() c
                        WHERE c.objid OPERATOR(pg_catalog.=)
                              $1::pg_catalog.text::pg_catalog.regclass)",
        &[format!("{schema}.minhash_indexes").into()],
    );
    if catalog_altered == Some(true) {
        relink(schema);
    }
    // CREATE TABLE ... INHERITS, ALTER TABLE ... INHERIT and ATTACH PARTITION
    let inherited: Option<String> = statement(
        &format!(
            "SELECT i.tbl::pg_catalog.text FROM {schema}.minhash_indexes i
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.tbl
             WHERE c.relispartition
                OR c.relkind OPERATOR(pg_catalog.=) 'r'
                   AND EXISTS (SELECT FROM pg_catalog.pg_inherits h
                               WHERE h.inhrelid OPERATOR(pg_catalog.=) i.tbl
                                  OR h.inhparent OPERATOR(pg_catalog.=) i.tbl)
             LIMIT 1"
        ),
        &[],
    );
    if let Some(tbl) = inherited {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "table {tbl} has a minhash index and cannot take part in inheritance or become \
                 a partition"
            ),
            Some(format!(
                "Drop the index first with minhash_index_drop({}).",
                quote_literal(&tbl)
            )),
        );
    }
    // (CREATE TABLE ... PARTITION OF names the partition, ATTACH and DETACH its parent)
    for cfg in CatalogRow::matching(
        schema,
        "i.partitions IS NOT NULL
         AND i.tbl OPERATOR(pg_catalog.=) ANY (
             SELECT coalesce(pg_catalog.pg_partition_root(c.objid), c.objid)
             FROM pg_catalog.pg_event_trigger_ddl_commands() c
             WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)",
    ) {
        tree_changed(schema, &cfg.text, None);
    }
    for cfg in CatalogRow::matching(
        schema,
        &format!("i.tbl OPERATOR(pg_catalog.=) ANY ({COMMAND_RELATIONS})"),
    ) {
        check_columns(&cfg);
        // a text expression must still read the same columns, with the same meaning
        if let Some(expression) = &cfg.text_expression {
            let problem = catching(others, || {
                let reads: Option<String> = statement(
                    "SELECT minhash_internal._minhash_text_expression(
                         $1::pg_catalog.regclass, $2::pg_catalog.text)",
                    &[cfg.tbl.into(), expression.as_str().into()],
                );
                (reads.as_ref() != Some(expression)).then(|| "would read differently".to_owned())
            })
            .unwrap_or_else(|message| Some(format!("fails: {message}")));
            if let Some(problem) = problem {
                let tbl = regclass_text(cfg.tbl);
                raise_detailed(
                    PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
                    format!("the minhash index of table {tbl} reads columns this changes"),
                    format!("Its text expression {expression} {problem}."),
                    drop_first(&tbl),
                );
            }
        }
        // ALTER TABLE ... OWNER TO: the band table follows its table's owner (the sync
        // trigger writes it as that owner and refuses a band table of anyone else)
        let new_owner: Option<String> = statement(
            "SELECT pg_catalog.format('ALTER TABLE %s OWNER TO %I', b.oid::pg_catalog.regclass,
                                      pg_catalog.pg_get_userbyid(t.relowner))
             FROM pg_catalog.pg_class t, pg_catalog.pg_class b
             WHERE t.oid OPERATOR(pg_catalog.=) $1 AND b.oid OPERATOR(pg_catalog.=) $2
               AND b.relowner OPERATOR(pg_catalog.<>) t.relowner",
            &[cfg.tbl.into(), cfg.band_table.into()],
        );
        if let Some(alter) = new_owner {
            run(&alter, &[]);
        }
        // ALTER TABLE ... SET LOGGED / SET UNLOGGED: so does the band table (a crash then
        // empties both or neither)
        let persistence: Option<String> = statement(
            "SELECT t.relpersistence::pg_catalog.text FROM pg_catalog.pg_class t
             WHERE t.oid OPERATOR(pg_catalog.=) $1 AND t.relkind OPERATOR(pg_catalog.=) 'r'
               AND (minhash_internal._minhash_citus_table(t.oid::pg_catalog.regclass)).kind IS NULL",
            &[cfg.tbl.into()],
        );
        if let Some(persistence) = persistence {
            let changed = statement::<bool>(
                "SELECT EXISTS (SELECT FROM pg_catalog.pg_class b
                                WHERE b.oid OPERATOR(pg_catalog.=) $1
                                  AND b.relpersistence::pg_catalog.text OPERATOR(pg_catalog.<>) $2)",
                &[cfg.band_table.into(), persistence.as_str().into()],
            );
            if changed == Some(true) {
                let set = if persistence == "u" {
                    "UNLOGGED"
                } else {
                    "LOGGED"
                };
                run(
                    &format!("ALTER TABLE {} SET {set}", regclass_text(cfg.band_table)),
                    &[],
                );
            }
        }
    }
    // A band table keeps its table's persistence, and so does every table of an indexed
    // partition tree (a crash empties an unlogged partition, whose band rows a logged band
    // table would keep).
    let band: Option<String> = statement(
        &format!(
            "SELECT i.band_table::pg_catalog.text FROM {schema}.minhash_indexes i
             JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.tbl
             JOIN pg_catalog.pg_class b ON b.oid OPERATOR(pg_catalog.=) i.band_table
             WHERE i.band_table OPERATOR(pg_catalog.=) ANY ({COMMAND_RELATIONS})
               AND (t.relkind OPERATOR(pg_catalog.=) 'r' OR t.relkind OPERATOR(pg_catalog.=) 'p')
               AND b.relpersistence OPERATOR(pg_catalog.<>) t.relpersistence
             LIMIT 1"
        ),
        &[],
    );
    if let Some(band) = band {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("band table {band} must keep the persistence of its table"),
            Some(
                "ALTER TABLE ... SET LOGGED or SET UNLOGGED the indexed table: its band table \
                 follows."
                    .into(),
            ),
        );
    }
    let partition: Option<String> = statement(
        &format!(
            "SELECT p.relid::pg_catalog.text FROM {schema}.minhash_indexes i
             JOIN pg_catalog.pg_class b ON b.oid OPERATOR(pg_catalog.=) i.band_table
             CROSS JOIN LATERAL pg_catalog.pg_partition_tree(i.tbl) p
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
             WHERE i.partitions IS NOT NULL
               AND c.relpersistence OPERATOR(pg_catalog.<>) b.relpersistence
               AND i.tbl OPERATOR(pg_catalog.=) ANY (
                   SELECT coalesce(pg_catalog.pg_partition_root(x.objid), x.objid)
                   FROM pg_catalog.pg_event_trigger_ddl_commands() x
                   WHERE x.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)
             LIMIT 1"
        ),
        &[],
    );
    if let Some(partition) = partition {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "partition {partition} of an indexed table must have the persistence of its \
                 band table"
            ),
            Some(
                "Every table of an indexed partition tree is logged, or every one unlogged, \
                 like the partitioned table."
                    .into(),
            ),
        );
    }
    // The sync triggers on the shards of a Citus table name it and its band tables
    // (_minhash_citus_args): a new name or schema for either would leave them naming what is
    // gone. (_minhash_citus_args is never NULL.)
    let moved = query(
        &format!(
            "SELECT i.tbl::pg_catalog.text, i.band_table::pg_catalog.text
             FROM {schema}.minhash_indexes i
             WHERE EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() c
                           WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                             AND (c.objid OPERATOR(pg_catalog.=) i.tbl
                                  OR c.objid OPERATOR(pg_catalog.=) i.band_table))
               AND (minhash_internal._minhash_citus_table(i.tbl)).kind IS NOT NULL
               AND NOT coalesce(minhash_internal._minhash_citus_args(i.tbl) OPERATOR(pg_catalog.=)
                                (SELECT minhash_internal._minhash_trigger_args(t.oid)
                                 FROM pg_catalog.pg_trigger t
                                 WHERE t.tgrelid OPERATOR(pg_catalog.=) i.tbl
                                   AND t.tgname OPERATOR(pg_catalog.=) 'minhash_sync_insert'),
                                false)
             LIMIT 1"
        ),
        &[],
        |table| {
            if table.is_empty() {
                return Ok(None);
            }
            let row = table.first();
            Ok(Some((
                row.get::<String>(1)?.expect("NOT NULL column"),
                row.get::<String>(2)?.expect("NOT NULL column"),
            )))
        },
    );
    if let Some((tbl, band)) = moved {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "Citus table {tbl} and its minhash band table {band} cannot be renamed or moved"
            ),
            Some(drop_first(&tbl)),
        );
    }
}

/// Refuses (2BP01) an ALTER TABLE that took away the id column of the index `cfg` or changed
/// its type, or did so to its text column (which must stay text or varchar, not virtual
/// generated).
fn check_columns(cfg: &CatalogRow) {
    // (the band table's id type: of a bigint one, any integer id column fits)
    let (band_id, band_id_name) = query(
        "SELECT a.atttypid, pg_catalog.format_type(a.atttypid, NULL)
         FROM pg_catalog.pg_attribute a
         WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) 'id'
           AND NOT a.attisdropped",
        &[cfg.band_table.into()],
        |table| {
            if table.is_empty() {
                return Ok((None, None));
            }
            let row = table.first();
            Ok((row.get::<pg_sys::Oid>(1)?, row.get::<String>(2)?))
        },
    );
    let bad: Option<String> = statement(
        "SELECT CASE WHEN NOT coalesce(pg_catalog.bool_or(
                              a.attname OPERATOR(pg_catalog.=) $2::pg_catalog.name AND
                              CASE WHEN $3::pg_catalog.regtype OPERATOR(pg_catalog.=) 'bigint'::pg_catalog.regtype
                                   THEN a.atttypid OPERATOR(pg_catalog.=) ANY (ARRAY[
                                            'smallint'::pg_catalog.regtype, 'integer'::pg_catalog.regtype,
                                            'bigint'::pg_catalog.regtype])
                                   ELSE a.atttypid OPERATOR(pg_catalog.=) $3::pg_catalog.regtype END),
                          false)
                     THEN $2
                     WHEN $4 IS NOT NULL
                          AND NOT coalesce(pg_catalog.bool_or(
                              a.attname OPERATOR(pg_catalog.=) $4::pg_catalog.name
                              AND a.atttypid OPERATOR(pg_catalog.=) ANY (ARRAY[
                                      'text'::pg_catalog.regtype,
                                      'character varying'::pg_catalog.regtype])
                              AND a.attgenerated OPERATOR(pg_catalog.<>) 'v'), false)
                     THEN $4 END
         FROM pg_catalog.pg_attribute a
         WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0
           AND NOT a.attisdropped",
        &[
            cfg.tbl.into(),
            cfg.id_column.as_str().into(),
            band_id.into(),
            cfg.text_column.as_deref().into(),
        ],
    );
    if let Some(bad) = bad {
        let id_types = if band_id == Some(pg_sys::INT8OID) {
            "smallint, integer or bigint".to_owned()
        } else {
            band_id_name.unwrap_or_default()
        };
        let tbl = regclass_text(cfg.tbl);
        raise_detailed(
            PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
            format!("the minhash index of table {tbl} reads column \"{bad}\""),
            format!(
                "Its id column \"{}\" must keep its type ({id_types}) and its text column \"{}\" \
                 stay text or character varying (not virtual generated), under these names.",
                cfg.id_column,
                cfg.text_column.as_deref().unwrap_or_default()
            ),
            drop_first(&tbl),
        );
    }
}

/// `minhash_ddl_dropped`: what the dropped objects take along.
fn dropped(schema: &str) {
    // A band table dropped without its table takes its index along, as DROP INDEX would
    // (pg_restore --clean drops the band table before its table): its sync triggers and
    // catalog row go, so writes to the table go on unindexed (a duplicate trigger that uses
    // the index refuses the drop, as minhash_index_drop does). The band table of a Citus
    // table goes only with its index or its table: Citus's table conversions
    // (alter_distributed_table(), undistribute_table()) of a band table alone would leave
    // its shard triggers naming a table that is gone.
    for cfg in CatalogRow::matching(
        schema,
        &format!(
            "i.band_table OPERATOR(pg_catalog.=) ANY ({DROPPED_RELATIONS})
             AND EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) i.tbl)
             AND NOT (i.tbl OPERATOR(pg_catalog.=) ANY ({DROPPED_RELATIONS}))"
        ),
    ) {
        let citus = statement::<bool>(
            "SELECT (minhash_internal._minhash_citus_table($1::pg_catalog.regclass)).kind IS NOT NULL",
            &[cfg.tbl.into()],
        );
        if citus == Some(true) {
            let tbl = regclass_text(cfg.tbl);
            raise(
                PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "the band table of the minhash index of Citus table {tbl} cannot be dropped \
                     or converted on its own"
                ),
                Some(format!(
                    "Drop the index with minhash_index_drop({}).",
                    quote_literal(&tbl)
                )),
            );
        }
        let dropped_name: Option<String> = statement(
            "SELECT d.object_name FROM pg_catalog.pg_event_trigger_dropped_objects() d
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
               AND d.objid OPERATOR(pg_catalog.=) $1 AND d.objsubid OPERATOR(pg_catalog.=) 0",
            &[cfg.band_table.into()],
        );
        let flag: Option<String> = statement(
            "SELECT t.tgname::pg_catalog.text FROM pg_catalog.pg_trigger t
             WHERE t.tgrelid OPERATOR(pg_catalog.=) $1
               AND t.tgfoid OPERATOR(pg_catalog.=) $3::pg_catalog.text::pg_catalog.regprocedure
               AND coalesce(CASE WHEN (minhash_internal._minhash_trigger_args(t.oid))[4]
                                      OPERATOR(pg_catalog.<>) ''
                                 THEN (minhash_internal._minhash_trigger_args(t.oid))[4] END,
                            $2)
                   OPERATOR(pg_catalog.=) $2
             LIMIT 1",
            &[
                cfg.tbl.into(),
                dropped_name.as_deref().into(),
                format!("{schema}.minhash_flag_duplicate()").into(),
            ],
        );
        let tbl = regclass_text(cfg.tbl);
        if let Some(flag) = flag {
            raise(
                PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop table {} because trigger {flag} on table {tbl} uses its minhash \
                     index",
                    dropped_name.as_deref().unwrap_or("<NULL>")
                ),
                Some(format!(
                    "Drop the trigger first, or the index and the trigger with \
                     minhash_index_drop({}, cascade => true).",
                    quote_literal(&tbl)
                )),
            );
        }
        notice(format!("drop cascades to the minhash index of table {tbl}"));
        run(
            &format!("SELECT {schema}.minhash_index_drop($1::pg_catalog.regclass)"),
            &[cfg.band_table.into()],
        );
    }
    for cfg in CatalogRow::matching(
        schema,
        &format!("i.tbl OPERATOR(pg_catalog.=) ANY ({DROPPED_RELATIONS})"),
    ) {
        // (for the CREATE TRIGGER check, till the end of the transaction)
        run(
            &format!(
                "SELECT pg_catalog.set_config('{DROPPED_TABLES}',
                     ({dropped_tables} OPERATOR(pg_catalog.||)
                      (SELECT d.object_identity FROM pg_catalog.pg_event_trigger_dropped_objects() d
                       WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                         AND d.objid OPERATOR(pg_catalog.=) $1
                         AND d.objsubid OPERATOR(pg_catalog.=) 0))::pg_catalog.text,
                     true)",
                dropped_tables = dropped_tables_sql()
            ),
            &[cfg.tbl.into()],
        );
        let kept = catching(
            |code| code == PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            || {
                run(
                    "SELECT minhash_internal._minhash_drop_objects($1::pg_catalog.regclass)",
                    &[cfg.band_table.into()],
                )
            },
        );
        if let Err(message) = kept {
            // (the dropped table's regclass prints as a bare OID)
            let dropped_name: Option<String> = statement(
                "SELECT d.object_identity FROM pg_catalog.pg_event_trigger_dropped_objects() d
                 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                   AND d.objid OPERATOR(pg_catalog.=) $1 AND d.objsubid OPERATOR(pg_catalog.=) 0",
                &[cfg.tbl.into()],
            );
            warning(
                format!(
                    "the minhash index of dropped table {} was left behind: {message}",
                    dropped_name.as_deref().unwrap_or("<NULL>")
                ),
                format!("Its owner can drop {}.", regclass_text(cfg.band_table)),
            );
        }
        run(
            &format!(
                "DELETE FROM {schema}.minhash_indexes i
                 WHERE i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
            ),
            &[cfg.band_table.into()],
        );
    }
    // (the catalog's partition list is input, and may name any table: what it leads to here is
    // its own index's cleanup, which never fails anyone's DROP)
    for cfg in CatalogRow::matching(
        schema,
        &format!(
            "i.partitions::pg_catalog.oid[] OPERATOR(pg_catalog.&&) ARRAY({DROPPED_RELATIONS})
             -- (a partition of an indexed tree carries the sync triggers, dropped with it)
             AND EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() d
                         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass
                           AND pg_catalog.starts_with(d.object_identity, 'minhash_sync_insert on '))"
        ),
    ) {
        let updated = catching(others, || {
            let dropped: Vec<Option<pg_sys::Oid>> = query(
                &format!("SELECT ARRAY({DROPPED_RELATIONS})"),
                &[],
                |table| Ok(table.first().get::<Vec<Option<pg_sys::Oid>>>(1)?.unwrap_or_default()),
            );
            tree_changed(schema, &cfg.text, Some(dropped));
        });
        if let Err(message) = updated {
            let tbl = regclass_text(cfg.tbl);
            warning(
                format!(
                    "the minhash index of {tbl} was not brought up to date with its partitions: \
                     {message}"
                ),
                format!(
                    "Its owner can make it exact with minhash_index_rebuild({}).",
                    quote_literal(&tbl)
                ),
            );
        }
    }
}

/// After DDL on the partition tree of the indexed partitioned table of catalog row `cfg` (as
/// text) (CREATE TABLE ... PARTITION OF, ATTACH PARTITION, DETACH PARTITION, DROP TABLE): a
/// table that joined the tree gets the sync triggers and its rows their band rows; a table
/// that left it loses both (the band rows of its rows, or, when it was dropped, the band rows
/// whose id no row of the table has any more: one anti-join of the band table). `dropped`: the
/// OIDs of the tables dropped. The catalog row then lists the tree as it is. As whoever runs
/// the DDL, who owns the partitioned table (or the band rows are left with a WARNING).
fn tree_changed(schema: &str, cfg: &str, dropped: Option<Vec<Option<pg_sys::Oid>>>) {
    let row = format!("$1::pg_catalog.text::{schema}.minhash_indexes");
    // (the tree now, parents before their partitions; the tree the catalog kept; the tables
    // that joined it, in the tree's order)
    let (unchanged, tree, kept, joined, tbl, band_table, id_column) = query(
        &format!(
            "SELECT x.tree::pg_catalog.oid[] OPERATOR(pg_catalog.=) x.kept, x.tree::pg_catalog.oid[],
                    x.kept,
                    ARRAY(SELECT u.t::pg_catalog.oid
                          FROM pg_catalog.unnest(x.tree) WITH ORDINALITY u(t, n)
                          WHERE u.t OPERATOR(pg_catalog.<>) ALL (x.kept) ORDER BY u.n),
                    (x.c).tbl::pg_catalog.oid, (x.c).band_table::pg_catalog.oid,
                    (x.c).id_column::pg_catalog.text
             FROM (SELECT r.c, ARRAY(SELECT minhash_internal._minhash_partitions((r.c).tbl)) AS tree,
                          coalesce((r.c).partitions::pg_catalog.oid[], '{{}}') AS kept
                   FROM (SELECT {row} AS c) r
                   OFFSET 0) x"
        ),
        &[cfg.into()],
        |table| {
            let row = table.first();
            let oids = |n| -> pgrx::spi::Result<Vec<Option<pg_sys::Oid>>> {
                Ok(row.get::<Vec<Option<pg_sys::Oid>>>(n)?.unwrap_or_default())
            };
            Ok((
                row.get::<bool>(1)?,
                oids(2)?,
                oids(3)?,
                oids(4)?,
                row.get::<pg_sys::Oid>(5)?.expect("NOT NULL column"),
                row.get::<pg_sys::Oid>(6)?.expect("NOT NULL column"),
                row.get::<String>(7)?.expect("NOT NULL column"),
            ))
        },
    );
    if unchanged == Some(true) {
        return;
    }
    let is_table = |rel: pg_sys::Oid| {
        statement::<bool>(
            "SELECT c.relkind OPERATOR(pg_catalog.=) 'r' FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[rel.into()],
        ) == Some(true)
    };
    let sync_triggers = |rel: pg_sys::Oid, adding: bool| {
        run(
            "SELECT minhash_internal._minhash_sync_triggers($1::pg_catalog.regclass, $2)",
            &[rel.into(), adding.into()],
        )
    };
    // joined: parents before their partitions
    for member in joined.into_iter().flatten() {
        sync_triggers(member, true);
        if is_table(member) {
            run(
                "SELECT minhash_internal._minhash_backfill($1::pg_catalog.regclass,
                                                           $2::pg_catalog.regclass)",
                &[band_table.into(), member.into()],
            );
        }
    }
    // left, still there (detached): the band rows of their rows go. The list of the tree the
    // catalog keeps is input (the table's owner may write it): a table it names is touched only
    // if it has the id column, belongs to a role whose rights the index's owner has, and no
    // index covers it now (as an indexed table or a partition of one).
    let left: Vec<Option<pg_sys::Oid>> = query(
        &format!(
            "SELECT k FROM pg_catalog.unnest($1::pg_catalog.oid[]) k
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) k
             WHERE k OPERATOR(pg_catalog.<>) ALL ($2::pg_catalog.oid[])
               AND k OPERATOR(pg_catalog.<>) ALL (coalesce($3::pg_catalog.oid[], '{{}}'))
               AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
                           WHERE a.attrelid OPERATOR(pg_catalog.=) k
                             AND a.attname OPERATOR(pg_catalog.=) $4::pg_catalog.name
                             AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped)
               AND pg_catalog.pg_has_role((SELECT t.relowner FROM pg_catalog.pg_class t
                                           WHERE t.oid OPERATOR(pg_catalog.=) $5),
                                          c.relowner, 'USAGE')
               AND NOT EXISTS (SELECT FROM {schema}.minhash_indexes i
                               WHERE i.tbl OPERATOR(pg_catalog.=)
                                     coalesce(pg_catalog.pg_partition_root(k), k))"
        ),
        &[
            kept.clone().into(),
            tree.clone().into(),
            dropped.clone().into(),
            id_column.as_str().into(),
            tbl.into(),
        ],
        |table| table.map(|row| row.get::<pg_sys::Oid>(1)).collect(),
    );
    for member in left.into_iter().flatten() {
        if is_table(member) {
            run(
                &format!(
                    "SELECT minhash_internal._minhash_as_owner((x.c).tbl, pg_catalog.format(
                         'WITH gone AS (%s), d AS (DELETE FROM %s b USING gone g
                              WHERE b.%s OPERATOR(pg_catalog.=) g.key AND b.id OPERATOR(pg_catalog.=) g.id
                              RETURNING 1)
                          SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                         minhash_internal._minhash_band_rows_sql(
                             x.c, $2::pg_catalog.regclass::pg_catalog.text),
                         (x.c).band_table,
                         -- (of format 2, the row whose first band's key is the gone row's)
                         CASE WHEN (x.c).format OPERATOR(pg_catalog.=) 1 THEN 'key' ELSE 'key1' END))
                     FROM (SELECT {row} AS c) x"
                ),
                &[cfg.into(), member.into()],
            );
        }
        sync_triggers(member, false);
    }
    // left, dropped: their rows are gone with them
    let dropped_left = dropped
        .as_ref()
        .is_some_and(|dropped| dropped.iter().flatten().any(|d| kept.contains(&Some(*d))));
    if dropped_left {
        let cleaned = catching(
            |code| code == PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            || {
                run(
                    &format!(
                        "SELECT minhash_internal._minhash_as_owner((x.c).tbl, pg_catalog.format(
                             'WITH d AS (DELETE FROM %s b WHERE NOT EXISTS (SELECT FROM %s t
                                  WHERE t.%I OPERATOR(pg_catalog.=) b.id) RETURNING 1)
                              SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                             (x.c).band_table, (x.c).tbl, (x.c).id_column))
                         FROM (SELECT {row} AS c) x"
                    ),
                    &[cfg.into()],
                )
            },
        );
        if let Err(message) = cleaned {
            let tbl = regclass_text(tbl);
            warning(
                format!(
                    "the minhash index of {tbl} keeps the band rows of the dropped partition: \
                     {message}"
                ),
                format!(
                    "Its owner can remove them with minhash_index_rebuild({}).",
                    quote_literal(&tbl)
                ),
            );
        }
    }
    run(
        &format!(
            "UPDATE {schema}.minhash_indexes i SET partitions = $1::pg_catalog.regclass[]
             WHERE i.band_table OPERATOR(pg_catalog.=) $2::pg_catalog.regclass"
        ),
        &[tree.into(), band_table.into()],
    );
}
