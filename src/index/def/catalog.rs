//! The `minhash_indexes` catalog as lookups and triggers read it: an index's row, every value
//! checked against PostgreSQL's own catalogs ([`IndexDef`]); the table a trigger serves; the
//! trigger that tells every backend that a row changed.

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgLogLevel, PgOid, PgSqlErrorCode};

use crate::core::params::check_threshold;
use crate::pg::backend::{uses_transaction_snapshot, with_latest_snapshot};
use crate::pg::error::{raise, OrRaise};
use crate::pg::names::{qualified, regclass_name, Regclass};
use crate::pg::tuple::{attnum, column};

use super::band::BandFormat;
use super::citus;
use super::extension::Extension;
use super::row_id::KeyType;
use super::settings::IndexSettings;
use super::text_source::{TextSource, COLUMNS_HINT};
use crate::index::run::owner::relation_owner;
use crate::index::run::prepared::with_prepared;
use crate::index::run::spi::spi_failed;

/// Trigger function on `minhash_indexes`, `AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW` and
/// `AFTER TRUNCATE`: invalidates the relcache entry of each table whose catalog row changed (of
/// every table on TRUNCATE), so that every backend drops its cached copy (see `access_plan`).
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_trigger(sql = false)]
fn _minhash_catalog_changed<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, std::convert::Infallible> {
    let data = trigger.trigger_data();
    // only on the catalog of the extension whose function this is
    // SAFETY: a trigger's relation is open while it fires; catalog lookups by OID.
    let on_catalog = unsafe {
        let rel = data.tg_relation;
        Extension::of_function(trigger.trigger().tgfoid).schema == (*(*rel).rd_rel).relnamespace
            && pgrx::name_data_to_str(&(*(*rel).rd_rel).relname) == "minhash_indexes"
    };
    if !on_catalog {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "_minhash_catalog_changed() fires only on the minhash_indexes catalog",
            None,
        );
    }
    if data.tg_event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_TRUNCATE {
        // SAFETY: queues an invalidation of every relcache entry; no arguments.
        unsafe { pg_sys::CacheInvalidateRelcacheAll() };
        return Ok(None);
    }
    // SAFETY: a row trigger's relation is open and its descriptor valid while it fires.
    let (catalog, tupdesc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let (tbl_attno, _, _) = column(tupdesc, catalog, "tbl", "");
    for tuple in [data.tg_trigtuple, data.tg_newtuple] {
        if tuple.is_null() {
            continue;
        }
        let mut is_null = false;
        // SAFETY: `tuple` is this event's old or new row, described by `tupdesc`; `tbl` is a
        // regclass, an OID datum.
        let tbl = unsafe {
            pg_sys::Oid::from_datum(
                pg_sys::heap_getattr(tuple, tbl_attno as i32, tupdesc, &mut is_null),
                is_null,
            )
        };
        // a dropped table has no relcache entry left to invalidate
        if let Some(tbl) = tbl.filter(|&t| qualified(t).is_some()) {
            // SAFETY: the relation exists (checked just above, under the catalog's lock).
            unsafe { pg_sys::CacheInvalidateRelcacheByRelid(tbl) };
        }
    }
    Ok(None)
}

/// An index as its `minhash_indexes` row describes it, every value checked against
/// PostgreSQL's catalogs: what a lookup, a check or a sync needs to know of it. How they reach
/// its rows is `access_plan::Index`, built from it.
pub(in crate::index) struct IndexDef {
    pub(in crate::index) tbl: pg_sys::Oid,
    pub(in crate::index) id_column: String,
    /// Where rows' texts come from: the text column or the text expression.
    pub(in crate::index) text: TextSource,
    pub(in crate::index) band_table: pg_sys::Oid,
    /// How the band table stores ids (`bigint` for integer keys).
    pub(in crate::index) key: KeyType,
    /// The type of the table's id column.
    pub(in crate::index) id_type: pg_sys::Oid,
    /// The signature length, shingling and banding.
    pub(in crate::index) settings: IndexSettings,
    /// How the band table stores a row's band rows.
    pub(in crate::index) format: BandFormat,
    pub(in crate::index) threshold: f64,
    /// The table and, if it is partitioned, every table of its partition tree (their relcache
    /// invalidations drop the cached index: a partition attached, detached or indexed).
    pub(in crate::index) members: Vec<pg_sys::Oid>,
    /// Of a Citus table distributed by another column than the id: that column (docs/citus.md).
    pub(in crate::index) tenant: Option<Tenant>,
    /// The type of the band table's id column (InvalidOid if the band table is gone): see
    /// [`IndexDef::check_band_ids`].
    band_id_type: pg_sys::Oid,
    /// The transaction that wrote the catalog row (InvalidTransactionId for a row a trigger's
    /// arguments carry): see [`IndexDef::snapshot_predates`].
    xmin: pg_sys::TransactionId,
}

/// The column a Citus table is distributed by when that is not its id (a tenant): the id is
/// unique within a tenant, and the band table's `tenant` column holds each band row's, which
/// places it on the shard of its row.
#[derive(Clone, Debug)]
pub(in crate::index) struct Tenant {
    pub(in crate::index) column: String,
    /// Its type, which the band table's `tenant` column has too.
    pub(in crate::index) key: KeyType,
}

impl Tenant {
    /// The tenant of the index of `tbl` with band table `band_table` and id column `id_column`:
    /// None if the band table has no `tenant` column; 55000 unless Citus distributes `tbl` by a
    /// column other than the id, of the type of that column (the band table is input).
    fn of(tbl: pg_sys::Oid, band_table: pg_sys::Oid, id_column: &str) -> Option<Tenant> {
        let attno = attnum(band_table, "tenant");
        if attno <= 0 {
            return None;
        }
        // SAFETY: a catalog lookup by OID and attribute number.
        let stored = unsafe { pg_sys::get_atttype(band_table, attno) };
        let column = citus::distribution_column(tbl)
            .filter(|column| column != id_column && column_type(tbl, column) == stored);
        let Some(column) = column else {
            altered_band_table(
                tbl,
                made_again("Its tenant column is not of the column the table is distributed by"),
            )
        };
        Some(Tenant {
            column,
            key: KeyType::of(stored),
        })
    }

    /// The attribute number of the tenant column in relation `rel` (a shard of the table) with
    /// descriptor `tupdesc`: 42703 if it is gone, 42804 unless it is of the type the band table
    /// stores (a shard is input too: its owner may alter it on a worker).
    pub(in crate::index) fn attribute(
        &self,
        tupdesc: pg_sys::TupleDesc,
        rel: pg_sys::Oid,
    ) -> usize {
        let (attno, typid, _) = column(tupdesc, rel, &self.column, COLUMNS_HINT);
        if typid != self.key.oid {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "tenant column \"{}\" of {} is not of the type the minhash index stores",
                    self.column,
                    regclass_name(rel)
                ),
                Some(COLUMNS_HINT.into()),
            );
        }
        attno
    }
}

impl IndexDef {
    /// The indexes of `tbl` that the arguments of a sync trigger on a shard of it carry (see
    /// `citus`), in their order (the coordinator's band-table OIDs): each a catalog row as
    /// JSON; those of other tables are left out.
    pub(in crate::index) fn of_trigger_args(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
        args: &[String],
    ) -> Vec<IndexDef> {
        let schema = Extension::of_function(fn_oid).quoted_schema();
        let sql = format!(
            "{} FROM pg_catalog.unnest($1::pg_catalog.text[]) WITH ORDINALITY a(arg, n)
             CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::{schema}.minhash_indexes,
                                                                  a.arg::pg_catalog.jsonb) i
             WHERE i.tbl OPERATOR(pg_catalog.=) $2::pg_catalog.regclass
             ORDER BY a.n",
            Self::select_list("0")
        );
        let rows = client
            .select(&sql, None, &[args.to_vec().into(), tbl.into()])
            .and_then(Self::catalog_rows)
            .unwrap_or_else(|e| spi_failed(e));
        rows.into_iter()
            .map(|row| Self::from_row(tbl, row, &[tbl]))
            .collect()
    }

    /// The columns of a catalog row `i` that [`IndexDef::catalog_rows`] reads, with `xmin`
    /// for its xmin.
    fn select_list(xmin: &str) -> String {
        format!(
            "SELECT i.id_column::pg_catalog.text, i.text_column::pg_catalog.text,
                    i.band_table::pg_catalog.oid, i.k, i.ngram, i.unit, i.threshold, i.bands,
                    i.rows_per_band, {xmin}::pg_catalog.text::pg_catalog.int8, i.text_expression,
                    i.format"
        )
    }

    /// The catalog rows of `tbl` (whose lock the caller holds), read through the catalog of
    /// the extension whose function `fn_oid` is running, each checked only once the band table
    /// it names is locked: a format conversion or a drop of the index holds its band table until
    /// it commits, and its catalog row is then read as it left it.
    ///
    /// A function's statement took its snapshot before the function locked anything, so under
    /// READ COMMITTED the rows are read as they are now, as PostgreSQL reads its own catalogs
    /// once it holds its locks, and again if a lock waited for a change to commit (as
    /// `RangeVarGetRelidExtended` does); whoever reads the band table or the table under the
    /// statement's snapshot then asks [`IndexDef::snapshot_predates`]. Under REPEATABLE READ
    /// and SERIALIZABLE they are read under the transaction's snapshot, and a row that no
    /// longer describes its band table (dropped, or converted to another format) because the
    /// index changed after that snapshot fails with 40001 ([`concurrent_index_change`]).
    pub(in crate::index) fn read(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
    ) -> Vec<IndexDef> {
        let schema = Extension::of_function(fn_oid).quoted_schema();
        let sql = format!(
            "{} FROM {schema}.minhash_indexes i WHERE i.tbl OPERATOR(pg_catalog.=) $1
             ORDER BY i.band_table::pg_catalog.oid",
            Self::select_list("i.xmin")
        );
        let read = || {
            let rows = with_prepared(
                client,
                &sql,
                PgOid::BuiltIn(PgBuiltInOids::OIDOID),
                tbl.into(),
                Self::catalog_rows,
            );
            for row in &rows {
                // SAFETY: a lock by OID; a band table dropped meanwhile is locked harmlessly.
                unsafe { pg_sys::LockRelationOid(row.1, pg_sys::AccessShareLock as i32) };
            }
            rows
        };
        let rows = if uses_transaction_snapshot() {
            let rows = read();
            if !rows.iter().all(describes_band_table) && with_latest_snapshot(read) != rows {
                concurrent_index_change(tbl);
            }
            rows
        } else {
            loop {
                // SAFETY: reads a counter of this backend.
                let seen = unsafe { pg_sys::SharedInvalidMessageCounter };
                let rows = with_latest_snapshot(read);
                // SAFETY: as above.
                if seen == unsafe { pg_sys::SharedInvalidMessageCounter } {
                    break rows;
                }
            }
        };
        // (read once for all the table's indexes)
        let members = if rows.is_empty() {
            Vec::new()
        } else {
            partition_tree(client, tbl)
        };
        rows.into_iter()
            .map(|row| Self::from_row(tbl, row, &members))
            .collect()
    }

    /// The rows of a query of [`IndexDef::select_list`].
    fn catalog_rows(table: pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<Vec<CatalogRow>> {
        let mut rows = Vec::new();
        for row in table {
            let text = |i| row.get::<String>(i).map(|v| v.expect("NOT NULL column"));
            let int = |i| row.get::<i32>(i).map(|v| v.expect("NOT NULL column"));
            rows.push((
                (text(1)?, row.get::<String>(2)?, row.get::<String>(11)?),
                row.get::<pg_sys::Oid>(3)?.expect("NOT NULL column"),
                (int(4)?, int(5)?, text(6)?),
                row.get::<f64>(7)?.expect("NOT NULL column"),
                (int(8)?, int(9)?),
                row.get::<i64>(10)?.expect("a row's xmin is never NULL"),
                // (NULL in the arguments of a sync trigger made before format 2)
                row.get::<i32>(12)?.unwrap_or(1),
            ));
        }
        Ok(rows)
    }

    /// The index of `tbl` (whose partition tree is `members`) that a catalog row describes.
    fn from_row(tbl: pg_sys::Oid, row: CatalogRow, members: &[pg_sys::Oid]) -> IndexDef {
        let (
            (id_column, text_column, text_expression),
            band_table,
            (k, ngram, unit),
            threshold,
            banding,
            xmin,
            format,
        ) = row;
        // Every value of the row is input (its table's owner may write it): checked here, and
        // the column types taken from pg_attribute, never from the row.
        let settings = IndexSettings::checked(k, ngram, &unit, banding.0, banding.1);
        let threshold = check_threshold(threshold).or_raise();
        let format = BandFormat::of_catalog(format).unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "band table format {format} of the minhash index of {} is not 1 or 2",
                    regclass_name(tbl)
                ),
                None,
            )
        });
        let id_type = column_type(tbl, &id_column);
        // SAFETY: a catalog lookup by OID and attribute number; InvalidOid for a band table
        // that is gone.
        let stored = unsafe { pg_sys::get_atttype(band_table, attnum(band_table, "id")) };
        // SAFETY: a catalog lookup by OID.
        let relkind = unsafe { pg_sys::get_rel_relkind(tbl) };
        let text_type = text_column
            .as_deref()
            .map(|column| column_type(tbl, column));
        // (what minhash_index_create indexes: a lookup reads it as the caller, and a view, or a
        // cast from another type, would run its owner's code with the caller's rights)
        if relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
            && relkind != pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char
        {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!(
                    "the minhash index of {} is not on a table",
                    regclass_name(tbl)
                ),
                None,
            );
        }
        if let (Some(column), Some(typid)) = (&text_column, text_type) {
            if typid != pg_sys::TEXTOID && typid != pg_sys::VARCHAROID {
                raise(
                    PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                    format!(
                        "text column \"{column}\" of {} is not of type text or character varying",
                        regclass_name(tbl)
                    ),
                    Some(COLUMNS_HINT.into()),
                );
            }
        }
        let key = KeyType::for_column(id_type);
        let id_column_name = id_column.clone();
        IndexDef {
            tbl,
            id_column,
            text: TextSource::new(tbl, text_column, text_expression),
            band_table,
            key,
            id_type,
            settings,
            format,
            threshold,
            members: members.to_vec(),
            tenant: Tenant::of(tbl, band_table, &id_column_name),
            band_id_type: stored,
            xmin: pg_sys::TransactionId::from_inner(xmin as u32),
        }
    }

    /// The tenant column of an index of a Citus table distributed by a tenant, for a call that
    /// names a tenant: 22023 for any other table, the hint saying what `tenant` applies to,
    /// then `more`.
    pub(in crate::index) fn tenant_column(&self, more: &str) -> &Tenant {
        let Some(tenant) = &self.tenant else {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "{} is not a Citus table distributed by a tenant column",
                    regclass_name(self.tbl)
                ),
                Some(format!(
                    "tenant applies to a table distributed by another column than the id \
                     (docs/citus.md){more}."
                )),
            );
        };
        tenant
    }

    /// Raises 55000 unless the band table stores ids as the key type of the table's id column
    /// (or is gone: writes then refuse it, lookups find no rows). What reads or writes band rows
    /// asks this (`access_plan::Index::of_table`); the band rows' ids are refused, never read
    /// as another type. A whole-table search, which reads only the table, does not.
    pub(in crate::index) fn check_band_ids(&self) {
        if self.band_id_type != pg_sys::InvalidOid && self.band_id_type != self.key.oid {
            altered_band_table(
                self.tbl,
                made_again("Its id column has another type than the table's"),
            );
        }
    }

    /// Whether the active snapshot was taken before the catalog row was written (the index was
    /// created or changed since: a statement that waited for a format conversion): under READ
    /// COMMITTED, a lookup then reads the band table and the table under a new snapshot, which
    /// sees what the change wrote, as a statement starting after it would; under REPEATABLE
    /// READ and SERIALIZABLE this raises 40001 ([`concurrent_index_change`]).
    pub(in crate::index) fn snapshot_predates(&self) -> bool {
        // SAFETY: reads of the transaction's state and a snapshot lookup of a transaction id
        // that a row carries.
        let newer = unsafe {
            self.xmin != pg_sys::InvalidTransactionId
                && pg_sys::ActiveSnapshotSet()
                && !pg_sys::TransactionIdIsCurrentTransactionId(self.xmin)
                && pg_sys::XidInMVCCSnapshot(self.xmin, pg_sys::GetActiveSnapshot())
        };
        if newer && uses_transaction_snapshot() {
            concurrent_index_change(self.tbl);
        }
        newer
    }

    /// `(attribute number, type)` of the id column in relation `rel` (the indexed table or a
    /// partition of it) with descriptor `tupdesc`: 42703 if it is gone, 42804 if its type is
    /// not one the index's ids are read as.
    pub(in crate::index) fn id_attribute(
        &self,
        tupdesc: pg_sys::TupleDesc,
        rel: pg_sys::Oid,
    ) -> (usize, pg_sys::Oid) {
        let (attno, typid, _) = column(tupdesc, rel, &self.id_column, COLUMNS_HINT);
        if !self.key.accepts(typid) {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "id column \"{}\" of {} is not of the type the minhash index stores",
                    self.id_column,
                    regclass_name(rel)
                ),
                Some(COLUMNS_HINT.into()),
            );
        }
        (attno, typid)
    }

    /// Raises 42501 unless the current user may read the id and text columns of the table
    /// (table-level SELECT, or SELECT on both columns), as a query of them would.
    pub(in crate::index) fn check_readable(&self) {
        let mut columns = vec![self.id_column.as_str()];
        columns.extend(self.text.columns());
        if !self.may_select(&columns) {
            let names: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
            raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for table {}", regclass_name(self.tbl)),
                Some(format!("A lookup reads the columns {}.", names.join(", "))),
            );
        }
    }

    /// Whether the current user may be told which row an error is about: SELECT on the id
    /// column and no row-level security hiding rows, as PostgreSQL decides whether a unique
    /// violation's DETAIL may show the key.
    pub(in crate::index) fn may_see_ids(&self) -> bool {
        !self.hides_rows() && self.may_select(&[&self.id_column])
    }

    /// Whether row-level security applies to the current user on the table: a query of it
    /// returns only the rows its policies show (with `row_security` off, would fail).
    pub(in crate::index) fn hides_rows(&self) -> bool {
        // SAFETY: a row-level security check by OID.
        let rls = unsafe { pg_sys::check_enable_rls(self.tbl, pg_sys::InvalidOid, true) };
        rls == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    }

    /// Whether the current user may SELECT `columns` of the table: table-level SELECT, or
    /// SELECT on each of them.
    pub(super) fn may_select(&self, columns: &[&str]) -> bool {
        let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
        // SAFETY: privilege checks by OID and attribute number.
        unsafe {
            let user = pg_sys::GetUserId();
            pg_sys::pg_class_aclcheck(self.tbl, user, select) == pg_sys::AclResult::ACLCHECK_OK
                || columns.iter().all(|name| {
                    let attno = attnum(self.tbl, name);
                    attno > 0
                        && pg_sys::pg_attribute_aclcheck(self.tbl, attno, user, select)
                            == pg_sys::AclResult::ACLCHECK_OK
                })
        }
    }
}

/// Raises 55000: the band table of the index of `tbl` is not what `minhash_index_create` made,
/// with the hint `hint` (why, and what to do).
pub(in crate::index) fn altered_band_table(tbl: pg_sys::Oid, hint: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "the band table of {} is not the plain table minhash_index_create() made",
            regclass_name(tbl)
        ),
        Some(hint),
    )
}

/// The hint of [`altered_band_table`] for a band table whose columns are not those made.
fn made_again(why: &str) -> String {
    format!("{why}. Drop the index with minhash_index_drop() and create it again.")
}

/// The type of column `name` of `tbl`, from `pg_attribute`; 42703 if it has none.
fn column_type(tbl: pg_sys::Oid, name: &str) -> pg_sys::Oid {
    // SAFETY: a catalog lookup by OID and attribute number; InvalidOid for none.
    let typid = unsafe { pg_sys::get_atttype(tbl, attnum(tbl, name)) };
    if typid == pg_sys::InvalidOid {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            format!(
                "column \"{name}\" of table {} does not exist",
                regclass_name(tbl)
            ),
            Some(COLUMNS_HINT.into()),
        );
    }
    typid
}

/// A catalog row as [`IndexDef::read`] reads it: (id column, text column, text
/// expression), band table, (k, ngram, unit), threshold, (bands, rows per band), xmin,
/// format.
type CatalogRow = (
    (String, Option<String>, Option<String>),
    pg_sys::Oid,
    (i32, i32, String),
    f64,
    (i32, i32),
    i64,
    i32,
);

/// Whether the band table a catalog row names is there and has the columns of the row's format
/// (true for a format that is not one: `IndexDef::from_row` refuses it).
fn describes_band_table(row: &CatalogRow) -> bool {
    let (band_table, format) = (row.1, row.6);
    BandFormat::of_catalog(format)
        .is_none_or(|format| attnum(band_table, &format.key_column(0)) > 0)
}

/// `tbl` and, if it is partitioned, every table of its partition tree below it, each locked
/// with AccessShareLock as a query of `tbl` locks them.
fn partition_tree(client: &SpiClient<'_>, tbl: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a catalog lookup by OID.
    if unsafe { pg_sys::get_rel_relkind(tbl) }
        != pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char
    {
        return vec![tbl];
    }
    let sql = "SELECT t.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree($1) t
               ORDER BY t.level, t.relid::pg_catalog.oid";
    let tree = with_prepared(
        client,
        sql,
        PgOid::BuiltIn(PgBuiltInOids::REGCLASSOID),
        tbl.into(),
        |table| {
            table
                .map(|row| row.get::<pg_sys::Oid>(1).map(|o| o.expect("a relation")))
                .collect::<pgrx::spi::Result<Vec<_>>>()
        },
    );
    for &member in &tree {
        // SAFETY: a lock by OID (one dropped meanwhile is locked harmlessly).
        unsafe { pg_sys::LockRelationOid(member, pg_sys::AccessShareLock as i32) };
    }
    tree
}

/// The table whose index the triggers on relation `rel` serve, and its owner: `rel`, or the
/// root of the partition tree of a partition (an index is made on a root:
/// `minhash_index_create`).
///
/// # Safety
/// `rel` is open.
pub(in crate::index) unsafe fn indexed_table(rel: pg_sys::Relation) -> (pg_sys::Oid, pg_sys::Oid) {
    // SAFETY: per the contract.
    let (oid, owner, partition) = unsafe {
        let class = &*(*rel).rd_rel;
        ((*rel).rd_id, class.relowner, class.relispartition)
    };
    if !partition {
        return (oid, owner);
    }
    let root = Spi::connect(|client| {
        with_prepared(
            client,
            "SELECT pg_catalog.pg_partition_root($1)::pg_catalog.oid",
            PgOid::BuiltIn(PgBuiltInOids::REGCLASSOID),
            oid.into(),
            |table| table.first().get::<pg_sys::Oid>(1),
        )
    })
    .unwrap_or(oid);
    (root, relation_owner(root))
}

/// Under REPEATABLE READ and SERIALIZABLE: raises 40001, for a transaction that writes `tbl`
/// but whose snapshot predates the index it finds now (created, or dropped and created again,
/// while the transaction waited for the lock): what that snapshot shows of the catalog and
/// the band table is not what the band table holds, as for a row changed after the snapshot.
/// Returns under READ COMMITTED, where each statement's snapshot follows its locks.
pub(in crate::index) fn refuse_newer_index(tbl: pg_sys::Oid) {
    // SAFETY: reads the transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        concurrent_index_change(tbl);
    }
}

/// Raises 40001: the index of `tbl` that the statement's snapshot shows was dropped (or
/// dropped and created again) after that snapshot was taken, while the statement waited for
/// its lock. Trying again sees the index as it is now.
pub(super) fn concurrent_index_change(tbl: pg_sys::Oid) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        format!(
            "could not serialize access due to a concurrent change of the minhash index of {}",
            regclass_name(tbl)
        ),
        "pg_minhash",
    )
    .set_hint("The transaction might succeed if retried.")
    .report(PgLogLevel::ERROR);
    unreachable!("ERROR reports do not return")
}

/// Raises 42809 unless relation `rel` is a table or a partitioned table, the relations a
/// minhash index can be on, saying what it is instead.
pub(in crate::index) fn check_indexable(rel: pg_sys::Oid) {
    // SAFETY: a syscache read; '\0' for a relation that does not exist.
    let kind = unsafe { pg_sys::get_rel_relkind(rel) } as u8;
    let what = match kind {
        b'r' | b'p' | 0 => return,
        b'v' => "a view",
        b'm' => "a materialized view",
        b'f' => "a foreign table",
        b'i' | b'I' => "an index",
        b'S' => "a sequence",
        b'c' => "a composite type",
        b't' => "a TOAST table",
        _ => "not a table",
    };
    raise(
        PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
        format!("{} is {what}", regclass_name(rel)),
        Some(
            "A minhash index is on a table or a partitioned table: create it on the table \
             the relation reads, and name that table in the call."
                .into(),
        ),
    );
}

/// [`check_indexable`] for the SQL functions; true.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_check_indexable(rel: Regclass) -> bool {
    check_indexable(rel.0);
    true
}
