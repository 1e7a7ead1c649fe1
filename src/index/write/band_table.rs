//! Writing a band table: opening it checked (the plain table `minhash_index_create` made, the
//! table owner's, with no trigger but its load trigger), batched prepared `INSERT`s and
//! `DELETE`s through SPI, and the claims a duplicate check makes (`claim`). The sync trigger
//! and the duplicate check write through here, as the table's owner.

use std::ffi::c_int;

use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid, PgSqlErrorCode};

use crate::core::bands::band_of_key;
use crate::core::capacity;
use crate::core::sketch::BandSketch;
use crate::pg::compat;
use crate::pg::error::raise;
use crate::pg::names::{
    equality_operator, qualified_name, qualified_type_name, quote_ident_str, regclass_name,
};

use super::claim;
use super::pause;
use crate::index::def::band::{band_row, BandFormat};
use crate::index::def::catalog::{altered_band_table, refuse_newer_index};
use crate::index::def::citus::Shard;
use crate::index::def::extension::Extension;
use crate::index::def::restore::{self, only_load_trigger};
use crate::index::def::row_id::{Id, KeyType};
use crate::index::read::access_plan::Index;
use crate::index::run::prepared::{self, Access};

/// Band rows gathered before one `INSERT` writes them.
pub(super) const INSERT_BATCH: usize = 10_000;

/// Band rows `(id, key)` gathered before one `DELETE` removes them.
pub(super) const DELETE_BATCH: usize = 10_000;

/// Writes the band rows of the row with id `id` and band entry `(keys, sketch)` of `tbl` (owned
/// by `owner`, indexed by extension `ext`) that an UPDATE (`update`) or an INSERT writes now,
/// as a claim (see `claim`): for `minhash_flag_duplicate`, before it checks the row. As the
/// table's owner.
pub(super) fn claim_band_rows(
    cfg: &Index,
    (tbl, owner, ext): (pg_sys::Oid, pg_sys::Oid, Extension),
    id: &Id,
    (keys, sketch): (&[i64], BandSketch),
    update: bool,
) {
    // SAFETY: the band table is opened, checked and closed by `BandTable`, as for the sync.
    unsafe {
        let band = BandTable::open(cfg, cfg.def.band_table, tbl, owner, ext);
        band.claim((id, None), keys, sketch, update);
    }
}

/// [`claim_band_rows`] on `shard` of a Citus table distributed by a tenant, for its row with
/// id `id` of tenant `tenant` (owned by `owner`): into the band table's shard beside it, so
/// that the checks of the statement's later rows of that shard, which read it through Citus
/// on this node, see the row (docs/citus.md). As the table's owner.
pub(super) fn claim_shard_band_rows(
    cfg: &Index,
    (shard, owner, ext): (Shard, pg_sys::Oid, Extension),
    (id, tenant): (&Id, &Id),
    keys: &[i64],
    sketch: BandSketch,
) {
    // SAFETY: as for `claim_band_rows`.
    unsafe {
        let band = BandTable::open_shard(cfg, shard, owner, ext);
        band.claim((id, Some(tenant)), keys, sketch, false);
    }
}

/// Takes back the claim `claim_band_rows` made for the row with id `id` of `tbl`: its band rows
/// are deleted (see `claim`).
pub(super) fn withdraw_claim(
    cfg: &Index,
    (tbl, owner, ext): (pg_sys::Oid, pg_sys::Oid, Extension),
    id: &Id,
) {
    // SAFETY: as for `claim_band_rows`.
    unsafe {
        let band = BandTable::open(cfg, cfg.def.band_table, tbl, owner, ext);
        claim::release(band.rel, (id, None));
        band.close();
    }
}

/// An indexed table's band table, open and locked for writing.
pub(super) struct BandTable {
    pub(super) tbl: pg_sys::Oid,
    pub(super) rel: pg_sys::Relation,
    /// The type of its id column.
    key: KeyType,
    /// Of a table distributed by a tenant, the type of its tenant column.
    tenant: Option<KeyType>,
    format: BandFormat,
    bands: usize,
    /// Whether its B-tree is unique (a band table's shard beside a shard of a Citus table): a
    /// row's old band rows must then go before its new ones are written.
    unique: bool,
}

impl BandTable {
    /// Opens the band table of `cfg` with RowExclusiveLock, as an INSERT or DELETE would, and
    /// refuses it unless it is the plain table `minhash_index_create` made, owned by `owner`,
    /// with no trigger but its load trigger of extension `ext` (see the module
    /// documentation).
    ///
    /// # Safety
    /// Within a transaction; the relation stays open until `close` or the transaction's end.
    pub(super) unsafe fn open(
        cfg: &Index,
        band: pg_sys::Oid,
        tbl: pg_sys::Oid,
        owner: pg_sys::Oid,
        ext: Extension,
    ) -> BandTable {
        let altered = |why: &str| -> ! {
            altered_band_table(
                tbl,
                format!(
                    "It {why}. Undo that, or drop the index with minhash_index_drop() and \
                     create it again."
                ),
            )
        };
        // SAFETY: opening by OID; NULL if the relation is gone. The relation's cached catalog
        // data is read while it is open.
        unsafe {
            let rel = pg_sys::try_table_open(band, pg_sys::RowExclusiveLock as c_int);
            if rel.is_null() {
                // (the catalog row this transaction's snapshot shows was dropped since)
                refuse_newer_index(tbl);
                raise(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                    format!("the band table of {} does not exist", regclass_name(tbl)),
                    Some("Drop the index with minhash_index_drop() and create it again.".into()),
                );
            }
            let class = &*(*rel).rd_rel;
            let desc = (*rel).rd_att;
            let columns = compat::attributes(desc);
            if class.relowner != owner {
                raise(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!(
                        "the band table of {} does not belong to the table's owner",
                        regclass_name(tbl)
                    ),
                    Some("Drop the index with minhash_index_drop() and create it again.".into()),
                );
            }
            if class.relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
                || class.relam != pg_sys::HEAP_TABLE_AM_OID
                || class.relispartition
                || class.relhassubclass
            {
                altered("is no longer a plain heap table");
            }
            if !only_load_trigger((*rel).trigdesc, ext) {
                altered("has triggers");
            }
            if !(*rel).rd_rules.is_null() {
                altered("has rules");
            }
            if class.relrowsecurity {
                altered("has row-level security");
            }
            if !(*desc).constr.is_null() && (*(*desc).constr).num_check != 0 {
                altered("has CHECK constraints");
            }
            // (a dropped column stays in the descriptor; the tenant column of a table
            // distributed by a tenant may stand anywhere: a change of format adds the others
            // after it)
            type Attribute<'a> = &'a pg_sys::FormData_pg_attribute;
            let plain = |a: &Attribute| a.attidentity == 0 && a.attgenerated == 0;
            let (tenant, live): (Vec<Attribute>, Vec<Attribute>) = columns
                .iter()
                .filter(|a| !a.attisdropped)
                .partition(|a| pgrx::name_data_to_str(&a.attname) == "tenant");
            let expected = cfg.def.format.columns(cfg.def.settings.banding.bands);
            let tenant_type = cfg.def.tenant.as_ref().map(|t| t.key.oid);
            // (the id in its key type, bigint for integer keys)
            let same_columns = live.len() == expected.len()
                && live.iter().zip(&expected).all(|(a, name)| {
                    a.atttypid
                        == if name == "id" {
                            cfg.def.key.oid
                        } else {
                            pg_sys::INT8OID
                        }
                        && plain(a)
                        && pgrx::name_data_to_str(&a.attname) == name
                })
                && tenant.iter().map(|a| a.atttypid).collect::<Vec<_>>()
                    == tenant_type.into_iter().collect::<Vec<_>>()
                && tenant.iter().all(plain);
            if !same_columns {
                altered(&format!(
                    "has other columns than ({}{}) of their types",
                    expected.join(", "),
                    if tenant_type.is_some() {
                        ", tenant"
                    } else {
                        ""
                    }
                ));
            }
            BandTable {
                tbl,
                rel,
                key: cfg.def.key,
                tenant: cfg.def.tenant.as_ref().map(|t| t.key),
                format: cfg.def.format,
                bands: cfg.def.settings.banding.bands,
                unique: false,
            }
        }
    }

    /// The shard of the band table of `cfg` beside `shard` of its table (see `citus`), opened
    /// and checked as [`BandTable::open`] does.
    ///
    /// # Safety
    /// As for [`BandTable::open`].
    pub(super) unsafe fn open_shard(
        cfg: &Index,
        shard: Shard,
        owner: pg_sys::Oid,
        ext: Extension,
    ) -> BandTable {
        let band = shard.beside(cfg.def.band_table).unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "the band table {} has no shard beside shard {} of {} on this node",
                    regclass_name(cfg.def.band_table),
                    shard.id,
                    regclass_name(shard.table)
                ),
                Some(
                    "The band table must stay co-located with its table; drop the index with \
                     minhash_index_drop() and create it again."
                        .into(),
                ),
            )
        });
        // SAFETY: per the contract.
        BandTable {
            unique: true,
            // SAFETY: per the contract.
            ..unsafe { BandTable::open(cfg, band, shard.table, owner, ext) }
        }
    }

    /// Writes the band rows of the row with id `id` (of tenant `tenant`, of a table distributed
    /// by a tenant) as a claim (see `claim`), and closes the band table.
    fn claim(
        self,
        (id, tenant): (&Id, Option<&Id>),
        keys: &[i64],
        sketch: BandSketch,
        update: bool,
    ) {
        let mut writer = BandWriter::new(
            self.rel,
            (self.key, self.tenant),
            (self.format, self.bands),
            (true, false),
        );
        writer.push(id, tenant, keys, sketch);
        let tids = writer.close();
        claim::record(self.rel, (id, tenant), tids, update);
        self.close();
    }

    /// A writer of a sync's new band rows; `tids`: it returns where the rows went.
    pub(super) fn writer(&self, tids: bool) -> BandWriter {
        BandWriter::new(
            self.rel,
            (self.key, self.tenant),
            (self.format, self.bands),
            (tids, true),
        )
    }

    /// Deletes the band rows `(ids[i], keys[i])` (of a table distributed by a tenant, of
    /// tenant `tenants[i]`) but those at the TIDs `kept`, and empties the vectors: of format 2,
    /// the rows of id `ids[i]` whose first band's key is `keys[i]` (the keys of other bands
    /// find none).
    pub(super) fn delete(
        &self,
        (ids, keys, tenants): (&mut Vec<Id>, &mut Vec<i64>, &mut Vec<Id>),
        kept: &[pg_sys::ItemPointerData],
    ) {
        if self.format == BandFormat::PerRow {
            let mut tenant = std::mem::take(tenants).into_iter();
            for (id, key) in std::mem::take(ids).into_iter().zip(std::mem::take(keys)) {
                let of = tenant.next();
                if band_of_key(key as u64) == 0 {
                    ids.push(id);
                    keys.push(key);
                    tenants.extend(of);
                }
            }
        }
        if ids.is_empty() {
            keys.clear();
            tenants.clear();
            return;
        }
        pause::point();
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        let (id_array, id_array_type) = self.key.array_arg(ids);
        let tenant = self.tenant.map(|key| key.array_arg(tenants));
        // (the statement is kept by its text, which names the id type; the kept TIDs, the last
        // argument, are hashed once per statement)
        let sql = format!(
            "DELETE FROM {band} b
             USING ROWS FROM (pg_catalog.unnest($1::{id_array}), pg_catalog.unnest($2){tenants}) AS o(id, key{of})
             WHERE b.{key} OPERATOR(pg_catalog.=) o.key AND b.id OPERATOR(pg_catalog.=) o.id{same}{kept}",
            id_array = qualified_type_name(id_array_type),
            key = self.format.key_column(0),
            tenants = match &tenant {
                Some((_, array_type)) => {
                    format!(", pg_catalog.unnest($3::{})", qualified_type_name(*array_type))
                }
                None => String::new(),
            },
            of = if tenant.is_some() { ", tenant" } else { "" },
            same = match self.tenant {
                Some(key) => format!(" AND b.tenant {} o.tenant", equality_operator(key.oid)),
                None => String::new(),
            },
            kept = if kept.is_empty() {
                String::new()
            } else {
                format!(
                    " AND NOT b.ctid OPERATOR(pg_catalog.=) ANY (SELECT pg_catalog.unnest(${}::pg_catalog.tid[]))",
                    if tenant.is_some() { 4 } else { 3 }
                )
            },
        );
        ids.clear();
        tenants.clear();
        let mut args = vec![id_array, std::mem::take(keys).into()];
        let mut types = vec![id_array_type, PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID)];
        if let Some((array, array_type)) = tenant {
            args.push(array);
            types.push(array_type);
        }
        if !kept.is_empty() {
            args.push(kept.to_vec().into());
            types.push(PgOid::BuiltIn(PgBuiltInOids::TIDARRAYOID));
        }
        run_prepared(&sql, &types, &args);
    }

    /// Deletes the band rows whose id no row of the indexed table has (after a partition of
    /// it was emptied): one anti-join of the band table with the table's ids.
    pub(super) fn delete_missing(&self, cfg: &Index) {
        pause::point();
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        let sql = format!(
            "DELETE FROM {band} b WHERE NOT EXISTS (SELECT FROM {tbl} t
                 WHERE t.{id} OPERATOR(pg_catalog.=) b.id)",
            tbl = qualified_name(cfg.def.tbl),
            id = quote_ident_str(&cfg.def.id_column),
        );
        Spi::connect_mut(|client| client.update(&sql, None, &[]).map(drop))
            .unwrap_or_else(|e| spi_write_failed(e));
    }

    /// Empties the band table (closing it first).
    pub(super) fn close_and_truncate(self) {
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        self.close();
        pause::point();
        Spi::connect_mut(|client| {
            client
                .update(&format!("TRUNCATE {band}"), None, &[])
                .map(drop)
        })
        .unwrap_or_else(|e| spi_write_failed(e));
    }

    pub(super) fn close(self) {
        // SAFETY: opened in `open`; the lock is kept until the transaction ends.
        unsafe { pg_sys::table_close(self.rel, pg_sys::NoLock as c_int) };
    }
}

/// Runs the data-modifying statement `sql`, prepared on first use and kept for the backend
/// (`prepared`).
pub(super) fn run_prepared(sql: &str, types: &[PgOid], args: &[pgrx::datum::DatumWithOid<'_>]) {
    run_prepared_with(sql, types, args, |_| Ok(()));
}

/// [`run_prepared`], calling `result` with what the statement returned.
pub(super) fn run_prepared_with(
    sql: &str,
    types: &[PgOid],
    args: &[pgrx::datum::DatumWithOid<'_>],
    result: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<()>,
) {
    Spi::connect(|client| prepared::run(client, sql, Access::Write, types, args, result))
        .unwrap_or_else(|e| spi_write_failed(e));
}

fn spi_write_failed(e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("writing the band table through SPI failed: {e}"),
        None,
    )
}

/// Band rows on their way into an open band table: one prepared `INSERT ... SELECT unnest(...)`
/// per `INSERT_BATCH` rows, run through SPI as the caller runs it (as the table's owner). The
/// executor writes the heap and every index and checks what the band table asks of a row; the
/// band table's load trigger keeps the rows (`restore::sync_writes`).
pub(super) struct BandWriter {
    band: pg_sys::Oid,
    key: KeyType,
    /// Of a table distributed by a tenant, the type of the tenant column.
    tenant: Option<KeyType>,
    format: BandFormat,
    /// The INSERT, with `RETURNING ctid` when the TIDs are wanted.
    sql: String,
    ids: Vec<Id>,
    /// Of a table distributed by a tenant, the tenant of each row.
    tenants: Vec<Id>,
    /// Of format 1 the key of each row; of format 2 the keys of each row, one after another.
    keys: Vec<i64>,
    sketches: [Vec<i64>; 2],
    /// Where the rows went, if asked for (`claim_band_rows`).
    tids: Option<Vec<pg_sys::ItemPointerData>>,
    /// Whether a sync writes (which may pause before each batch: `pause`).
    sync: bool,
}

impl BandWriter {
    /// A writer into `band`, open and checked (`BandTable::open`), whose ids are of type
    /// `key` (and tenants of type `tenant`, of a table distributed by a tenant), of format
    /// `format` with `bands` bands; `tids`: `close` returns where the rows went
    /// (`RETURNING ctid`); `sync`: for a sync rather than a claim.
    fn new(
        band: pg_sys::Relation,
        (key, tenant): (KeyType, Option<KeyType>),
        (format, bands): (BandFormat, usize),
        (tids, sync): (bool, bool),
    ) -> BandWriter {
        // SAFETY: the relation is open.
        let band = unsafe { (*band).rd_id };
        let array_of = |key: KeyType| {
            // SAFETY: a catalog lookup of the array type of an existing type.
            qualified_type_name(PgOid::from(unsafe { pg_sys::get_array_type(key.oid) }))
        };
        let id_array = array_of(key);
        // (a claim skips a band row the band table's unique B-tree already has, which only a
        // Citus table's has: that of a row the statement then fails to insert, as a duplicate
        // of its key or an INSERT ... ON CONFLICT's; the sync finds the claim incomplete and
        // writes the row's band rows itself, or the statement releases it)
        let returning = match (tids, sync) {
            (false, _) => "",
            (true, true) => " RETURNING ctid",
            (true, false) => " ON CONFLICT DO NOTHING RETURNING ctid",
        };
        // ($5: the tenants, of a table distributed by a tenant)
        let (tenant_column, tenants) = match tenant {
            Some(tenant) => (
                ", tenant",
                format!(", pg_catalog.unnest($5::{})", array_of(tenant)),
            ),
            None => ("", String::new()),
        };
        // (the statement is kept by its text, which names the id type)
        let sql = match format {
            BandFormat::PerBand => format!(
                "INSERT INTO {} (id, key, sketch1, sketch2{tenant_column})
                 SELECT pg_catalog.unnest($1::{id_array}), pg_catalog.unnest($4),
                        pg_catalog.unnest($2), pg_catalog.unnest($3){tenants}{returning}",
                qualified_name(band),
            ),
            // (row n's keys are $4[(n - 1) * bands + 1 ...])
            BandFormat::PerRow => format!(
                "INSERT INTO {} ({}{tenant_column})
                 SELECT u.id, u.sketch1, u.sketch2, {}{}
                 FROM ROWS FROM (pg_catalog.unnest($1::{id_array}), pg_catalog.unnest($2),
                                 pg_catalog.unnest($3){tenants})
                      WITH ORDINALITY u(id, sketch1, sketch2{tenant_column}, n){returning}",
                qualified_name(band),
                format.columns(bands).join(", "),
                (1..=bands)
                    .map(|i| format!("$4[((u.n - 1) * {bands} + {i})::pg_catalog.int4]"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if tenant.is_some() { ", u.tenant" } else { "" },
            ),
        };
        BandWriter {
            band,
            key,
            tenant,
            format,
            sql,
            ids: Vec::new(),
            tenants: Vec::new(),
            keys: Vec::new(),
            sketches: Default::default(),
            tids: tids.then(Vec::new),
            sync,
        }
    }

    /// Queues the band rows of the row with id `id` (of a table distributed by a tenant, of
    /// tenant `tenant`), band keys `keys` and band sketch `sketch`.
    pub(super) fn push(&mut self, id: &Id, tenant: Option<&Id>, keys: &[i64], sketch: BandSketch) {
        let rows = match self.format {
            BandFormat::PerBand => keys.len(),
            BandFormat::PerRow => 1,
        };
        for _ in 0..rows {
            self.ids.push(id.clone());
            if self.tenant.is_some() {
                self.tenants.extend(tenant.cloned());
            }
            for (column, value) in self.sketches.iter_mut().zip(sketch) {
                column.push(value as i64);
            }
        }
        self.keys.extend_from_slice(keys);
        if self.ids.len() >= INSERT_BATCH {
            self.flush();
        }
    }

    /// Inserts the queued rows with one execution of the prepared INSERT.
    pub(super) fn flush(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        if self.sync {
            pause::point();
        }
        let (ids, id_array_type) = self.key.array_arg(&std::mem::take(&mut self.ids));
        let [s1, s2] = std::mem::take(&mut self.sketches);
        let keys = std::mem::take(&mut self.keys);
        let mut args = vec![ids, s1.into(), s2.into(), keys.into()];
        let int8_array = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
        let mut types = vec![id_array_type, int8_array, int8_array, int8_array];
        if let Some(tenant) = self.tenant {
            let (tenants, tenant_array_type) = tenant.array_arg(&std::mem::take(&mut self.tenants));
            args.push(tenants);
            types.push(tenant_array_type);
        }
        let tids = &mut self.tids;
        restore::sync_writes(self.band, || {
            run_prepared_with(&self.sql, &types, &args, |mut table| {
                let Some(tids) = tids else {
                    return Ok(());
                };
                let rows = table.len();
                table = table.first();
                for _ in 0..rows {
                    if let Some(tid) = table.get_datum_by_ordinal(1)? {
                        // SAFETY: a tid datum points to an ItemPointerData.
                        tids.push(unsafe { *tid.cast_mut_ptr::<pg_sys::ItemPointerData>() });
                    }
                    table.next();
                }
                Ok(())
            })
        });
    }

    /// Inserts what is queued; returns where the rows went, if asked for.
    pub(super) fn close(mut self) -> Vec<pg_sys::ItemPointerData> {
        self.flush();
        self.tids.unwrap_or_default()
    }
}

/// What one id's band rows become: the keys of the band rows it has that go (`old`; of format
/// 2 the first band's key finds the row) and the band entries (keys and sketch) of the rows it
/// now has (`new`: none, one, or of ids that repeat across partitions, several).
pub(super) struct Change {
    pub(super) id: Id,
    /// Of a table distributed by a tenant, the tenant.
    pub(super) tenant: Option<Id>,
    pub(super) old: Vec<i64>,
    pub(super) new: Vec<(Vec<i64>, BandSketch)>,
}

/// How the claims of the changed ids are handled (see `claim`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Claims {
    /// The band table has no open claim of this transaction (the old band rows go first).
    None,
    /// An id's latest claim is kept when it holds exactly its new band rows, and released
    /// otherwise.
    Take,
    /// Every claim of an id is released (a sync that reconciles).
    ReleaseAll,
}

/// A sync's changes to a band table, applied in batches so that no row's text is ever absent
/// from what a concurrent duplicate check sees: within a batch, the new band rows are written
/// (or a claim holding exactly them is kept) first, then the claims not kept are released,
/// then the old band rows are deleted, all but those just written or kept. (A committed band
/// row that this transaction deletes stays visible to the check's dirty snapshot until it
/// commits; one it wrote and then deleted does not.) All changes of one id go in one batch.
/// The old band rows go first instead on a band table with a unique B-tree (beside a Citus
/// shard, where checks make no claims), and where this transaction holds no claim on the band
/// table (`Claims::None`: no duplicate check claimed the statement's texts; a sync that
/// reconciles always writes first): a row's new text is not in the band table before its sync
/// then, and the old band rows are committed (visible to a check until the transaction ends)
/// or of row versions this transaction replaced; no `RETURNING` and no TID filter are needed.
pub(super) struct Changes<'b> {
    band: &'b BandTable,
    claims: Claims,
    batch: Vec<Change>,
    /// Band rows the batch writes and deletes.
    writes: usize,
    deletes: usize,
}

impl<'b> Changes<'b> {
    pub(super) fn new(band: &'b BandTable, claims: Claims) -> Changes<'b> {
        Changes {
            band,
            claims,
            batch: Vec::new(),
            writes: 0,
            deletes: 0,
        }
    }

    /// Queues `change`; applies the batch once it is full.
    pub(super) fn push(&mut self, change: Change) {
        let band_rows = |keys: usize| match self.band.format {
            BandFormat::PerBand => keys,
            BandFormat::PerRow => usize::from(keys > 0),
        };
        self.writes += change
            .new
            .iter()
            .map(|(keys, _)| band_rows(keys.len()))
            .sum::<usize>();
        self.deletes += band_rows(change.old.len());
        capacity::push(&mut self.batch, change, "the rows a statement touched")
            .unwrap_or_else(|e| e.fail());
        if self.writes >= INSERT_BATCH || self.deletes >= DELETE_BATCH {
            self.apply();
        }
    }

    /// Applies what is queued (see [`Changes`]).
    pub(super) fn apply(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        (self.writes, self.deletes) = (0, 0);
        let (band, claims) = (self.band, self.claims);
        // (where the kept claims and the new band rows are: the old band rows are the others)
        let mut kept = Vec::new();
        let taken: Vec<bool> = batch
            .iter()
            .map(|change| {
                let (Claims::Take, [(keys, sketch)]) = (claims, change.new.as_slice()) else {
                    return false;
                };
                let mut rows: Vec<_> = keys
                    .iter()
                    .map(|&key| band_row(&change.id, key, *sketch))
                    .collect();
                let row = (&change.id, change.tenant.as_ref());
                claim::take(band.rel, row, &mut rows)
                    .map(|tids| kept.extend(tids))
                    .is_some()
            })
            .collect();
        let release = || {
            for change in &batch {
                let row = (&change.id, change.tenant.as_ref());
                match claims {
                    Claims::None => {}
                    Claims::Take => claim::release_row(band.rel, row),
                    Claims::ReleaseAll => claim::release_all(band.rel, &change.id),
                }
            }
        };
        let delete = |kept: &[pg_sys::ItemPointerData]| {
            let (mut ids, mut keys, mut tenants) = (Vec::new(), Vec::new(), Vec::new());
            for change in &batch {
                for &key in &change.old {
                    ids.push(change.id.clone());
                    keys.push(key);
                    tenants.extend(change.tenant.clone());
                }
            }
            band.delete((&mut ids, &mut keys, &mut tenants), kept);
        };
        let write_first = !band.unique && claims != Claims::None;
        if !write_first {
            release();
            delete(&[]);
        }
        let deletes = batch.iter().any(|change| !change.old.is_empty());
        let mut writer = band.writer(write_first && deletes);
        for (change, _) in batch.iter().zip(&taken).filter(|(_, &taken)| !taken) {
            for (keys, sketch) in &change.new {
                writer.push(&change.id, change.tenant.as_ref(), keys, *sketch);
            }
        }
        kept.extend(writer.close());
        if write_first {
            release();
            delete(&kept);
        }
    }
}
