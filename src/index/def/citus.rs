//! The sync triggers on the shards of a Citus table (docs/citus.md).
//!
//! `minhash_index_create` makes the band table of a distributed table a distributed table
//! co-located with it (of a reference table, a reference table), and Citus makes each sync
//! trigger of the table on every shard of it too, named `<trigger>_<shard id>`. A write fires
//! them on the node that holds the shard, which has the table's metadata (Citus keeps it on
//! every node) but not the extension's catalog rows: the triggers there carry the catalog rows
//! of the table's indexes as their arguments (`_minhash_sync_triggers` in src/index/sql/build.sql), and
//! write the band rows into the shard of the band table that holds the same range of ids, on
//! the same node.
//!
//! Nothing here is taken on trust: the firing relation is a shard only if Citus's metadata
//! says so (its shard id, the table it belongs to, and that name resolving to this very
//! relation); the trigger's name must be ours with that shard id; an argument is used only if
//! it names this table; and the band table must be the plain table of the table's owner that
//! `minhash_index_create` made (`sync::BandTable::open`), written as that owner. Whoever could
//! make such a trigger by hand owns the table, and can write only what that owner may.

use std::ffi::{CStr, CString};

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use crate::pg::error::raise;
use crate::pg::names::Regclass;

use super::extension::{older_sql_objects, Extension};
use super::restore::{is_ours, triggers, SYNC_FUNCTION, SYNC_INSERT_TRIGGER};
use super::trigger::trigger_args;
use crate::index::run::owner::SettingScope;
use crate::index::run::row::RowDatum;
use crate::index::run::spi::spi_failed;

/// A shard of a Citus table, on this node.
#[derive(Clone, Copy)]
pub(in crate::index) struct Shard {
    /// The Citus table it is a shard of (on this node, its shell table).
    pub(in crate::index) table: pg_sys::Oid,
    pub(in crate::index) id: i64,
}

impl Shard {
    /// The shard that relation `rel` (named `relname`) is, if Citus is installed and its
    /// metadata says so. Costs nothing for a relation whose name does not end in `_<digits>`.
    pub(in crate::index) fn of(rel: pg_sys::Oid, relname: &str) -> Option<Shard> {
        let (_, suffix) = relname.rsplit_once('_')?;
        if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let id: i64 = suffix.parse().ok()?;
        if !metadata_present() {
            return None;
        }
        let sql = "SELECT s.logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_shard s
                   WHERE s.shardid OPERATOR(pg_catalog.=) $1
                     AND pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid, false))
                         OPERATOR(pg_catalog.=) $2::pg_catalog.regclass";
        let table = first_oid(sql, &[id.into(), rel.into()])?;
        Some(Shard { table, id })
    }

    /// The shard on this node of the Citus table `band` (a band table of this shard's table)
    /// that holds the rows of this shard's range: of the same co-location group and range, or
    /// the one shard of a reference table. None if there is none here.
    pub(in crate::index) fn beside(self, band: pg_sys::Oid) -> Option<pg_sys::Oid> {
        let sql = "SELECT pg_catalog.to_regclass(pg_catalog.shard_name(b.logicalrelid, b.shardid, false))::pg_catalog.oid
                   FROM pg_catalog.pg_dist_shard s
                   JOIN pg_catalog.pg_dist_partition ps ON ps.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid
                   JOIN pg_catalog.pg_dist_partition pb ON pb.colocationid OPERATOR(pg_catalog.=) ps.colocationid
                   JOIN pg_catalog.pg_dist_shard b ON b.logicalrelid OPERATOR(pg_catalog.=) pb.logicalrelid
                   WHERE s.shardid OPERATOR(pg_catalog.=) $1
                     AND pb.logicalrelid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass
                     AND (b.shardminvalue OPERATOR(pg_catalog.=) s.shardminvalue
                          OR (b.shardminvalue IS NULL AND s.shardminvalue IS NULL))
                     AND (b.shardmaxvalue OPERATOR(pg_catalog.=) s.shardmaxvalue
                          OR (b.shardmaxvalue IS NULL AND s.shardmaxvalue IS NULL))";
        first_oid(sql, &[self.id.into(), band.into()])
    }
}

/// The oid in the first column of the first row of `sql` with `args`; None if it returns no
/// row (as for a table whose name merely ends in `_<digits>`) or a null.
fn first_oid(sql: &str, args: &[pgrx::datum::DatumWithOid]) -> Option<pg_sys::Oid> {
    Spi::connect(|client| {
        let table = client.select(sql, Some(1), args)?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get::<pg_sys::Oid>(1)
    })
    .unwrap_or_else(|e| spi_failed(e))
}

/// Raises 0A000 for trigger `trigger` of ours that fired on a shard (or a shard in the making)
/// of `table` without the arguments a trigger there needs: the table was made a Citus table
/// (`create_distributed_table`, `create_reference_table`) after its index, and Citus copied
/// the triggers it had then. The statement that fires it fails, so no write goes unindexed;
/// the table is indexed again as a Citus table.
pub(in crate::index) fn refuse_index_before_citus(table: &str, trigger: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!(
            "trigger \"{trigger}\" on {table} belongs to a minhash index made before the table \
             became a Citus table"
        ),
        Some(
            "Drop the index with minhash_index_drop() before making the table a Citus table, and \
             create it again afterwards (docs/citus.md)."
                .into(),
        ),
    )
}

/// Whether Citus's shard metadata is in this database.
fn metadata_present() -> bool {
    catalog_relation(c"pg_dist_shard")
}

/// Whether pg_catalog has a relation named `name` (`to_regclass('pg_catalog.<name>')`).
fn catalog_relation(name: &CStr) -> bool {
    // SAFETY: a syscache lookup by name in pg_catalog.
    unsafe {
        pg_sys::get_relname_relid(
            name.as_ptr(),
            pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        ) != pg_sys::InvalidOid
    }
}

/// The column Citus distributes table `tbl` by (hash-distributed), if it does.
pub(super) fn distribution_column(tbl: pg_sys::Oid) -> Option<String> {
    if !metadata_present() {
        return None;
    }
    let sql = "SELECT pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)::pg_catalog.text
               FROM pg_catalog.pg_dist_partition p
               WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                 AND p.partmethod OPERATOR(pg_catalog.=) 'h' AND p.partkey IS NOT NULL";
    Spi::connect(|client| {
        let table = client.select(sql, Some(1), &[tbl.into()])?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get::<String>(1)
    })
    .unwrap_or_else(|e| spi_failed(e))
}

/// Whether relation `rel` is a Citus table (distributed, reference or local), whose rows are
/// in its shards rather than in it.
pub(in crate::index) fn is_citus_table(rel: pg_sys::Oid) -> bool {
    if !metadata_present() {
        return false;
    }
    let sql = "SELECT FROM pg_catalog.pg_dist_partition p
               WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass";
    Spi::connect(|client| {
        client
            .select(sql, Some(1), &[rel.into()])
            .map(|t| !t.is_empty())
    })
    .unwrap_or_else(|e| spi_failed(e))
}

/// Whether this node is a Citus worker: its group is not the coordinator's (0).
pub(in crate::index) fn is_worker() -> bool {
    if !catalog_relation(c"pg_dist_local_group") {
        return false;
    }
    let sql = "SELECT g.groupid OPERATOR(pg_catalog.<>) 0 FROM pg_catalog.pg_dist_local_group g";
    Spi::connect(|client| {
        let table = client.select(sql, Some(1), &[])?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get::<bool>(1)
    })
    .unwrap_or_else(|e| spi_failed(e))
    .unwrap_or(false)
}

/// [`is_worker`] for SQL.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
#[search_path(pg_catalog, pg_temp)]
fn _minhash_citus_worker() -> bool {
    is_worker()
}

/// What Citus makes of table `tbl` (README, "Scaling out with Citus"), when Citus is
/// installed: `kind` `distributed` (hash-distributed, by `dist_column`), `reference`, `other` (a
/// Citus local or single-shard table), or None (a table Citus does not manage, or no Citus).
pub(in crate::index) struct CitusTable {
    pub(in crate::index) kind: Option<String>,
    pub(in crate::index) dist_column: Option<String>,
}

impl CitusTable {
    /// What Citus makes of `tbl` (None: NULL, which Citus manages no table as).
    pub(in crate::index) fn of(tbl: Option<pg_sys::Oid>) -> CitusTable {
        let none = CitusTable {
            kind: None,
            dist_column: None,
        };
        if !catalog_relation(c"pg_dist_partition") {
            return none;
        }
        // (the column name as a `name` holds it: at most NAMEDATALEN - 1 bytes)
        let sql = "SELECT CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'h' AND p.partkey IS NOT NULL
                                THEN 'distributed'
                                WHEN p.partmethod OPERATOR(pg_catalog.=) 'n'
                                     AND p.repmodel OPERATOR(pg_catalog.=) 't' THEN 'reference'
                                ELSE 'other' END,
                           CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'h' AND p.partkey IS NOT NULL
                                THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)
                                     ::pg_catalog.name::pg_catalog.text END
                    FROM pg_catalog.pg_dist_partition p
                    WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass";
        let arg = match tbl {
            Some(tbl) => DatumWithOid::from(tbl),
            None => DatumWithOid::null::<pg_sys::Oid>(),
        };
        Spi::connect(|client| {
            let table = client.select(sql, Some(1), &[arg])?;
            if table.is_empty() {
                return Ok(none);
            }
            let row = table.first();
            Ok(CitusTable {
                kind: row.get::<String>(1)?,
                dist_column: row.get::<String>(2)?,
            })
        })
        .unwrap_or_else(|e| spi_failed(e))
    }
}

/// [`CitusTable::of`] for SQL, as a record of its two OUT parameters.
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/def/citus.rs)
CREATE FUNCTION minhash_internal._minhash_citus_table(tbl regclass, OUT kind text, OUT dist_column name)
LANGUAGE c STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#
)]
fn _minhash_citus_table(tbl: Option<Regclass>, fcinfo: pg_sys::FunctionCallInfo) -> RowDatum {
    let citus = CitusTable::of(tbl.map(|t| t.0));
    let kind = citus.kind.and_then(|k| k.into_datum());
    let dist_column = citus.dist_column.map(|column| {
        // SAFETY: a name datum: NAMEDATALEN zeroed bytes, the name (shorter: see the query)
        // copied in.
        unsafe {
            let name = pg_sys::palloc0(pg_sys::NAMEDATALEN as usize).cast::<pg_sys::NameData>();
            let column = CString::new(column).expect("names have no NUL");
            pg_sys::namestrcpy(name, column.as_ptr());
            pg_sys::Datum::from(name)
        }
    });
    // SAFETY: this call's fcinfo; a text and a name, as the OUT parameters are.
    unsafe { RowDatum::record(fcinfo, &[kind, dist_column]) }
}

/// The arguments of the insert sync trigger of `ext` on `shard` (open as `rel`), or with no
/// shard on the Citus table `rel` itself (on a worker, its shell table, which Citus gives the
/// table's triggers too): the catalog rows of the indexes of its table (see the module
/// documentation); none if it has none.
///
/// # Safety
/// `rel` is open.
pub(in crate::index) unsafe fn sync_trigger_args(
    rel: pg_sys::Relation,
    shard: Option<Shard>,
    ext: Extension,
) -> Vec<String> {
    let name = match shard {
        Some(shard) => format!("{SYNC_INSERT_TRIGGER}_{}", shard.id),
        None => SYNC_INSERT_TRIGGER.to_owned(),
    };
    let after_insert_statement = pg_sys::TRIGGER_TYPE_INSERT as i16;
    // SAFETY: per the contract, the trigger descriptor of an open relation.
    unsafe { triggers((*rel).trigdesc) }
        .iter()
        .find(|t| is_ours(t, &name, after_insert_statement, SYNC_FUNCTION, ext))
        .map(trigger_args)
        .unwrap_or_default()
}

/// Runs `f`, whose queries of Citus tables may run inside a query of a shard (a trigger on it,
/// or a call Citus sent to a worker with a query of one shard), with Citus's
/// `citus.allow_nested_distributed_execution` on: Citus refuses such queries otherwise, as it
/// cannot see this transaction's writes on other nodes. Every lookup of a Citus table runs
/// this way (`lookup::traced`); the duplicate trigger says so in what it promises
/// (docs/citus.md).
pub(in crate::index) fn nested_execution<T>(f: impl FnOnce() -> T) -> T {
    let scope = SettingScope::enter(c"citus.allow_nested_distributed_execution", c"on");
    let result = f();
    drop(scope);
    result
}

/// The library entry point of 0.2.0's `_minhash_verify_pairs`, which `minhash_duplicates` and
/// `minhash_clusters` of a Citus table called before they searched in memory as on one node:
/// kept so that 0.2.0's install script loads with this library (`ALTER EXTENSION pg_minhash
/// UPDATE` then drops the function). A 0.2.0 catalog that calls it is told to update.
#[pg_extern(sql = false)]
fn _minhash_verify_pairs() {
    older_sql_objects()
}
