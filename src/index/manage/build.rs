//! The machinery of an index that its maintenance shares: finding an index's catalog row
//! (`_minhash_index`), filling a band table from its table's rows (`_minhash_backfill`), and
//! the sync triggers on an indexed table (`_minhash_sync_triggers`). Each runs as the caller,
//! with the search path `pg_catalog, pg_temp` of its `SET` clause, as the PL/pgSQL it replaced
//! did; what reads the table or writes the band table runs as the table's owner
//! (`run::owner`). The SQL they run is built by `format()` from the same templates as before.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::{JsonB, PgSqlErrorCode};

use crate::pg::error::{notice, raise};
use crate::pg::names::{quote_ident_str, relation_name, Regclass};

use super::{extension_schema, query, regclass_or_empty, regclass_text, statement};
use crate::index::def::catalog::check_indexable;
use crate::index::def::citus::{is_worker, CitusTable};
use crate::index::run::owner::owner_statement;
use crate::index::run::row::{first_row, Row, RowDatum};
use crate::index::run::spi::{first_value, spi_failed};

/// The catalog row of the index `tbl` names: the index whose band table tbl is, or the default
/// index of table tbl, its first: the one whose band table has the lowest OID (42704 for a
/// table with none). A second index never changes what a call naming the table reads.
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/manage/build.rs)
CREATE FUNCTION minhash_internal._minhash_index(tbl regclass)
RETURNS @extschema@.minhash_indexes
LANGUAGE c STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_index(tbl: Option<Regclass>, fcinfo: pg_sys::FunctionCallInfo) -> RowDatum {
    index_row(&extension_schema(fcinfo), tbl.map(|t| t.0)).returned()
}

/// [`_minhash_index`] of `tbl`, with the catalog of the extension in `schema`.
fn index_row(schema: &str, tbl: Option<pg_sys::Oid>) -> Row {
    let Some(tbl) = tbl else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "tbl must not be NULL",
            None,
        )
    };
    let sql = format!(
        "SELECT i FROM {schema}.minhash_indexes i
         WHERE i.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
            OR i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
         ORDER BY i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass DESC,
                  i.band_table::pg_catalog.oid
         LIMIT 1"
    );
    let row = Spi::connect(|client| first_row(client.select(&sql, None, &[tbl.into()])?))
        .unwrap_or_else(|e| spi_failed(e));
    let Some(cfg) = row else {
        check_indexable(tbl);
        // (a Citus worker keeps no catalog rows; the lookups read the shell table's triggers)
        if CitusTable::of(Some(tbl)).kind.is_some() && is_worker() {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "this node has no minhash catalog: {} is a Citus table, and this is a worker",
                    regclass_text(tbl)
                ),
                Some(
                    "Run this call on the coordinator, in a statement of its own: Citus sends a \
                     statement that reads one row of a distributed table whole to that row's \
                     worker."
                        .into(),
                ),
            );
        }
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("table {} has no minhash index", regclass_text(tbl)),
            Some("Create one with minhash_index_create(table, id_column, text_column).".into()),
        );
    };
    // The row is input (its table's owner may write it): what it names must be what
    // minhash_index_create indexes, a table whose text column is text or varchar. Queries
    // read it as the caller, and a view or another type's cast would run the owner's code so.
    let cfg_tbl = cfg.oid(c"tbl");
    let cfg_tbl_text = || cfg_tbl.map_or_else(|| "<NULL>".into(), regclass_text);
    // SAFETY: a syscache lookup by OID ('\0' for a relation that does not exist).
    let kind = cfg_tbl.map_or(0, |t| unsafe { pg_sys::get_rel_relkind(t) } as u8);
    if kind != b'r' && kind != b'p' {
        raise(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!("the minhash index of {} is not on a table", cfg_tbl_text()),
            None,
        );
    }
    if let Some(column) = cfg.name(c"text_column") {
        let name = std::ffi::CString::new(column.as_str()).expect("names have no NUL");
        // SAFETY: syscache lookups by OID and name, and by OID and attribute number
        // (InvalidAttrNumber for a dropped or missing column).
        let is_text = cfg_tbl.is_some_and(|t| unsafe {
            let attnum = pg_sys::get_attnum(t, name.as_ptr());
            attnum > 0
                && [pg_sys::TEXTOID, pg_sys::VARCHAROID].contains(&pg_sys::get_atttype(t, attnum))
        });
        if !is_text {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "text column \"{column}\" of {} is not of type text or character varying",
                    cfg_tbl_text()
                ),
                None,
            );
        }
    }
    cfg
}

/// Fills the (empty) band table `band` of an index from its table's rows in ten set-based
/// chunks of ascending ids (rows with a NULL id are left out, as the sync refuses them); with
/// `source`, from the rows of that partition of tbl only (a partition attached to it). A chunk
/// ends after all the rows of its last id (WITH TIES: ids may repeat across the partitions of a
/// partitioned table). A build that has run for two seconds reports progress after each
/// further chunk in a NOTICE: rows done, percentage and rate (a small table's build says
/// nothing). Returns the rows read. It reads the table and writes the band table as the
/// table's owner (`run::owner`).
#[pg_extern(volatile, parallel_unsafe, schema = "minhash_internal")]
#[search_path(pg_catalog, pg_temp)]
fn _minhash_backfill(
    band: Option<Regclass>,
    source: default!(Option<Regclass>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<i64> {
    let cfg = index_row(&extension_schema(fcinfo), band.map(|b| b.0));
    let tbl = cfg.oid(c"tbl").expect("a catalog row's table");
    let band_table = cfg.oid(c"band_table");
    // (the band table's load trigger would keep every row, at the cost of one call per band
    // row; src/index/def/restore.rs)
    let (id_type, loading, bulk) = query(
        "SELECT (SELECT pg_catalog.format_type(a.atttypid, NULL) FROM pg_catalog.pg_attribute a
                 WHERE a.attrelid OPERATOR(pg_catalog.=) ($1).tbl
                   AND a.attname OPERATOR(pg_catalog.=) ($1).id_column),
                EXISTS (SELECT FROM pg_catalog.pg_trigger t
                        WHERE t.tgrelid OPERATOR(pg_catalog.=) ($1).band_table
                          AND t.tgname OPERATOR(pg_catalog.=) 'minhash_bands_load'
                          AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'),
                NOT EXISTS (SELECT FROM pg_catalog.pg_index x
                            WHERE x.indrelid OPERATOR(pg_catalog.=) ($1).band_table)",
        &[cfg.spi_arg()],
        |table| {
            let row = table.first();
            Ok((
                row.get::<String>(1)?,
                row.get::<bool>(2)?.unwrap_or(false),
                row.get::<bool>(3)?.unwrap_or(false),
            ))
        },
    );
    // SAFETY: the current time; no arguments.
    let started = unsafe { pg_sys::GetCurrentTimestamp() };
    let source = source.map_or(tbl, |s| s.0);
    // A row with a text and no id cannot be indexed: 23502, as the sync trigger says of one
    // (the chunks below read the rows in id order, which would leave it out unsaid). A NULL
    // or empty text has no band values, and such a row stays.
    let null_ids = owner_sql(
        // (an aggregate, not EXISTS: Citus runs it on each shard as it runs a count)
        r#"SELECT pg_catalog.format(
           'SELECT pg_catalog.to_jsonb(pg_catalog.count(*) OPERATOR(pg_catalog.>) 0) FROM %s d
            WHERE d.%I IS NULL
              AND minhash_internal._minhash_band_values((%s)::pg_catalog.text, %s) IS NOT NULL',
           $2::pg_catalog.regclass, ($1).id_column, minhash_internal._minhash_text_sql($1, 'd', false),
           minhash_internal._minhash_settings_sql($1))"#,
        &cfg,
        vec![source.into()],
    );
    if from_jsonb::<bool>(as_owner(tbl, &null_ids), "$1::pg_catalog.bool") == Some(true) {
        raise(
            PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
            format!(
                "null value in column \"id\" of relation \"{}\" violates not-null constraint",
                band_table.map_or_else(|| "<NULL>".into(), relation_name)
            ),
            Some(format!(
                "Rows of {} with a text need an id.",
                regclass_text(tbl)
            )),
        );
    }
    let count = format!(
        "SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM {}",
        regclass_text(source)
    );
    // Of a Citus table: one INSERT ... SELECT, which Citus runs on each shard of the table into
    // the band table's shard beside it.
    if CitusTable::of(Some(tbl)).kind.is_some() {
        let total = from_jsonb::<i64>(as_owner(tbl, &count), "$1::pg_catalog.int8");
        let insert = owner_sql(
            "SELECT pg_catalog.format('INSERT INTO %s (%s) %s', ($1).band_table,
                        minhash_internal._minhash_band_columns($1),
                        minhash_internal._minhash_band_insert_sql($1, $2::pg_catalog.regclass::pg_catalog.text))",
            &cfg,
            vec![source.into()],
        );
        as_owner(tbl, &insert);
        return total;
    }
    let load_trigger = |action: &str| {
        as_owner(
            tbl,
            &format!(
                "ALTER TABLE {} {action} TRIGGER minhash_bands_load",
                regclass_or_empty(band_table)
            ),
        );
    };
    if loading {
        load_trigger("DISABLE");
    }
    let total = from_jsonb::<i64>(as_owner(tbl, &count), "$1::pg_catalog.int8");
    // (greatest(ceil(total / 10.0), 1))
    let chunk = total.map(|t| ((t + 9).div_euclid(10)).max(1));
    let mut done: i64 = 0;
    let mut last_id: Option<String> = None;
    loop {
        // Into a new band table, which has no index yet (minhash_index_create's), the chunk's
        // rows go to _minhash_band_fill, which signs them on the build's threads and writes
        // their band rows a thousand at a time, as COPY writes rows (src/index/write/fill.rs);
        // into one with its indexes (a rebuild, a partition attached), an INSERT ... SELECT.
        let template = if bulk { FILL_CHUNK } else { INSERT_CHUNK };
        let args = vec![
            source.into(),
            last_id.clone().into(),
            id_type.clone().into(),
            chunk.into(),
            tbl.into(),
        ];
        let progress = as_owner(tbl, &owner_sql(template, &cfg, args));
        let (n, id): (Option<i64>, Option<String>) = query(
            "SELECT ($1 OPERATOR(pg_catalog.->>) 0)::pg_catalog.int8, $1 OPERATOR(pg_catalog.->>) 1",
            &[progress.into()],
            |table| {
                let row = table.first();
                Ok((row.get(1)?, row.get(2)?))
            },
        );
        if n == Some(0) {
            break;
        }
        last_id = id;
        done += n.unwrap_or(0);
        // SAFETY: the current time; no arguments.
        let elapsed = unsafe { pg_sys::GetCurrentTimestamp() } - started;
        let seconds = (elapsed as f64 / 1e6).max(0.001);
        if seconds < 2.0 {
            continue;
        }
        let message: String = statement(
            "SELECT pg_catalog.format('minhash index on %s: %s of %s rows (%s %%), %s rows/s',
                        $1::pg_catalog.regclass, $2, $3,
                        pg_catalog.round(100.0 OPERATOR(pg_catalog.*) $2 OPERATOR(pg_catalog./) $3),
                        pg_catalog.round($2 OPERATOR(pg_catalog./) $4))",
            &[source.into(), done.into(), total.into(), seconds.into()],
        )
        .expect("format() of a non-NULL format string");
        notice(message);
    }
    if loading {
        load_trigger("ENABLE");
    }
    Some(done)
}

/// The chunk statement of a band table with no index: the chunk's rows handed to
/// `_minhash_band_fill` (`$1` the catalog row, `$2` the source, `$3` the last chunk's largest
/// id, `$4` the id's type, `$5` the chunk's rows, `$6` the table).
const FILL_CHUNK: &str = r#"SELECT pg_catalog.format(
                'SELECT pg_catalog.to_jsonb(minhash_internal._minhash_band_fill(
                     %1$s::pg_catalog.oid::pg_catalog.regclass, %2$s::pg_catalog.oid::pg_catalog.regclass, %3$L))',
                $6::pg_catalog.oid, ($1).band_table::pg_catalog.oid, pg_catalog.format(
                'SELECT d.%1$I::%2$s, (%3$s)::pg_catalog.text, d.%1$I::pg_catalog.text
                 FROM (SELECT * FROM %4$s WHERE %1$I IS NOT NULL %5$s ORDER BY %1$I
                       FETCH FIRST %6$s ROWS WITH TIES) d
                 ORDER BY d.%1$I',
                ($1).id_column, minhash_internal._minhash_band_id_type(($1).band_table),
                minhash_internal._minhash_text_sql($1, 'd', false), $2::pg_catalog.regclass,
                CASE WHEN $3::pg_catalog.text IS NOT NULL
                     THEN pg_catalog.format('AND %I > %L::%s', ($1).id_column, $3::pg_catalog.text,
                                            $4::pg_catalog.text) ELSE '' END,
                $5::pg_catalog.int8))"#;

/// The chunk statement of a band table with its B-trees: an INSERT ... SELECT of the chunk's
/// band rows (arguments as [`FILL_CHUNK`]'s).
const INSERT_CHUNK: &str = r#"SELECT pg_catalog.format(
                'WITH chunk AS MATERIALIZED (
                     SELECT * FROM %1$s WHERE %2$I IS NOT NULL %5$s ORDER BY %2$I
                     FETCH FIRST %6$s ROWS WITH TIES),
                 added AS (INSERT INTO %3$s (%7$s) %4$s)
                 SELECT pg_catalog.jsonb_build_array(pg_catalog.count(*),
                     (SELECT c.%2$I::pg_catalog.text FROM chunk c ORDER BY c.%2$I DESC LIMIT 1))
                 FROM chunk',
                $2::pg_catalog.regclass, ($1).id_column, ($1).band_table,
                minhash_internal._minhash_band_insert_sql($1, 'chunk'),
                CASE WHEN $3::pg_catalog.text IS NOT NULL
                     THEN pg_catalog.format('AND %I > %L::%s', ($1).id_column, $3::pg_catalog.text,
                                            $4::pg_catalog.text) ELSE '' END,
                $5::pg_catalog.int8, minhash_internal._minhash_band_columns($1))"#;

/// The statement the query `sql` builds (a `format()` of it), with the catalog row `cfg` as
/// `$1` and `args` as `$2`, `$3`, ...
fn owner_sql<'a>(sql: &str, cfg: &'a Row, args: Vec<DatumWithOid<'a>>) -> String {
    let mut all = vec![cfg.spi_arg()];
    all.extend(args);
    statement(sql, &all).expect("format() of a non-NULL format string")
}

/// Runs `sql` as the owner of `tbl` (`_minhash_as_owner`): the jsonb value it returns, if any.
fn as_owner(tbl: pg_sys::Oid, sql: &str) -> Option<JsonB> {
    owner_statement(tbl, sql, first_value::<JsonB>)
}

/// The jsonb `value` cast as the expression `cast` of `$1` casts it.
fn from_jsonb<T: FromDatum + IntoDatum>(value: Option<JsonB>, cast: &str) -> Option<T> {
    statement(&format!("SELECT {cast}"), &[value.into()])
}

/// The sync triggers' names, events, transition tables and levels.
const SYNC_TRIGGERS: [(&str, &str, &str, &str); 5] = [
    (
        "minhash_sync_insert",
        "AFTER INSERT",
        "REFERENCING NEW TABLE AS new_rows",
        "STATEMENT",
    ),
    (
        "minhash_sync_update",
        "AFTER UPDATE",
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
        "STATEMENT",
    ),
    (
        "minhash_sync_delete",
        "AFTER DELETE",
        "REFERENCING OLD TABLE AS old_rows",
        "STATEMENT",
    ),
    ("minhash_sync_truncate", "AFTER TRUNCATE", "", "STATEMENT"),
    ("~minhash_sync_claim", "BEFORE UPDATE", "", "ROW"),
];

/// Creates (adding true; those it has already stay) or drops the sync triggers on `rel`: an
/// indexed table or a table of its partition tree. They serve every index of the table: four
/// statement triggers that keep the band table exact, and the row trigger
/// "~minhash_sync_claim" (BEFORE UPDATE, named to fire after the table's other BEFORE
/// triggers) that claims an updated text's band rows at once when a duplicate check does not
/// fire on UPDATE. One fixed trigger function of the extension does both; it checks that the
/// table and trigger that fire it are these (src/index/write/sync.rs).
#[pg_extern(volatile, parallel_unsafe, schema = "minhash_internal")]
#[search_path(pg_catalog, pg_temp)]
fn _minhash_sync_triggers(rel: Option<Regclass>, adding: Option<bool>) {
    let rel = rel.map(|r| r.0);
    let citus = CitusTable::of(rel).kind.is_some();
    let rel_arg = || match rel {
        Some(rel) => DatumWithOid::from(rel),
        None => DatumWithOid::null::<pg_sys::Oid>(),
    };
    let mut args = String::new();
    let mut unsafe_triggers = None;
    if citus {
        // Citus makes each trigger on every shard of the table too, where it fires on the
        // workers, which have no catalog rows: its arguments carry the catalog rows of the
        // table's indexes (src/index/def/citus.rs), so they are made again whenever those
        // change. Citus asks for citus.enable_unsafe_triggers to make triggers on its tables
        // (README, "Scaling out with Citus"), here only.
        args = statement(
            "SELECT coalesce(pg_catalog.string_agg(pg_catalog.quote_literal(a), ', '), '')
             FROM pg_catalog.unnest(minhash_internal._minhash_citus_args($1::pg_catalog.regclass)) a",
            &[rel_arg()],
        )
        .unwrap_or_default();
        unsafe_triggers = statement::<String>(
            "SELECT pg_catalog.current_setting('citus.enable_unsafe_triggers')",
            &[],
        );
        set_unsafe_triggers(Some("on".into()));
    }
    let adding_true = adding == Some(true);
    let not_adding = adding == Some(false);
    let rel_text = regclass_or_empty(rel);
    for (name, event, transition, level) in SYNC_TRIGGERS {
        let exists = |same_args: bool| {
            statement::<bool>(
                "SELECT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                                WHERE t.tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                                  AND t.tgname OPERATOR(pg_catalog.=) $2
                                  AND t.tgfoid OPERATOR(pg_catalog.=)
                                      'minhash_internal._minhash_sync()'::pg_catalog.regprocedure
                                  AND (NOT $3 OR minhash_internal._minhash_trigger_args(t.oid)
                                                 OPERATOR(pg_catalog.=)
                                                 minhash_internal._minhash_citus_args($1::pg_catalog.regclass)))",
                &[rel_arg(), name.into(), same_args.into()],
            )
            .unwrap_or(false)
        };
        if adding_true && exists(citus) {
            continue;
        }
        if (citus || not_adding) && exists(false) {
            statement::<bool>(
                &format!("DROP TRIGGER {} ON {rel_text}", quote_ident_str(name)),
                &[],
            );
        }
        if adding_true {
            statement::<bool>(
                &format!(
                    "CREATE TRIGGER {} {event} ON {rel_text} {transition}
                            FOR EACH {level} EXECUTE FUNCTION minhash_internal._minhash_sync({args})",
                    quote_ident_str(name)
                ),
                &[],
            );
        }
    }
    if citus {
        set_unsafe_triggers(unsafe_triggers);
    }
}

/// `set_config('citus.enable_unsafe_triggers', value, true)`.
fn set_unsafe_triggers(value: Option<String>) {
    statement::<String>(
        "SELECT pg_catalog.set_config('citus.enable_unsafe_triggers', $1, true)",
        &[value.into()],
    );
}
