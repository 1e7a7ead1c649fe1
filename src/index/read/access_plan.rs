//! An index as lookups, checks and syncs reach it: its catalog row (`catalog::IndexDef`), its
//! placement (a table, a partitioned table or a Citus table) and its lookup SQL, built once
//! and kept per backend until PostgreSQL invalidates a relation it depends on.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, PgSqlErrorCode};

use crate::pg::error::raise;
use crate::pg::names::{
    equality_operator, qualified_name, quote_ident_str, quote_literal, regclass_name,
};

use super::btree::{BandIndex, RowIndex};
use super::sketch_store::SketchStore;
use crate::index::def::band::BandFormat;
use crate::index::def::catalog::{check_indexable, refuse_newer_index, IndexDef};
use crate::index::def::citus;
use crate::index::def::extension::Extension;
use crate::index::def::restore::has_sync_trigger;
use crate::index::run::prepared::with_prepared;

thread_local! {
    /// Indexes read in this backend, by table: its indexes, in the order of their band
    /// tables' OIDs. An entry is dropped when PostgreSQL invalidates the relcache entry of its
    /// table (or a table of its partition tree) or of one of its band tables: DDL on either (the index
    /// functions create and drop the table's triggers) and every change to its catalog row
    /// (the `minhash_indexes_changed` trigger) does that, in this backend at the end of the
    /// command and in the others before their next lock on either table or their next
    /// transaction, as for PostgreSQL's own caches.
    static INDEXES: RefCell<HashMap<pg_sys::Oid, Indexes>> = RefCell::new(HashMap::new());

    /// Relations whose relcache entries were invalidated since [`INDEXES`] was last pruned
    /// (`None`: all of them). The callback only records them: it may run in the middle of
    /// anything, including while `INDEXES` is borrowed.
    static INVALIDATED: RefCell<Option<Vec<pg_sys::Oid>>> = const { RefCell::new(Some(Vec::new())) };

    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Invalidations remembered one by one; beyond this many, the whole cache is dropped.
const MAX_INVALIDATED: usize = 256;

/// Relcache invalidation callback: remembers `relid` (InvalidOid: every relation).
unsafe extern "C-unwind" fn relcache_invalidated(_: pg_sys::Datum, relid: pg_sys::Oid) {
    INVALIDATED.with(|pending| {
        // never borrowed while PostgreSQL code runs, so this cannot fail; if it ever did,
        // forgetting everything is always safe
        let Ok(mut pending) = pending.try_borrow_mut() else {
            return;
        };
        match pending.as_mut() {
            Some(relids) if relid != pg_sys::InvalidOid && relids.len() < MAX_INVALIDATED => {
                relids.push(relid)
            }
            _ => *pending = None,
        }
    });
}

/// The indexes of one table.
pub(in crate::index) type Indexes = Rc<[Rc<Index>]>;

/// The cached catalog rows of `tbl`, after dropping the invalidated entries.
fn cached(tbl: pg_sys::Oid) -> Option<Indexes> {
    if !CALLBACK_REGISTERED.replace(true) {
        // SAFETY: registered once per backend; the callback neither errors nor allocates in
        // PostgreSQL memory.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(
                Some(relcache_invalidated),
                pg_sys::Datum::from(0),
            )
        };
    }
    let pending = INVALIDATED.with_borrow_mut(|p| p.replace(Vec::new()));
    INDEXES.with_borrow_mut(|configs| {
        match pending {
            None => configs.clear(),
            Some(relids) if !relids.is_empty() => configs.retain(|_, cfgs| {
                cfgs.iter().all(|cfg| {
                    !relids.contains(&cfg.def.band_table)
                        && !cfg.def.members.iter().any(|m| relids.contains(m))
                })
            }),
            Some(_) => {}
        }
        configs.get(&tbl).cloned()
    })
}

/// Where an index's rows and band rows are, resolved once when the index is read: it answers
/// how a lookup or a duplicate check reaches them.
pub(in crate::index) enum Placement {
    /// A table of this node: the band table's `(key, id)` index and the table's unique index
    /// on the id are read directly where usable (see `btree`).
    Table {
        band_index: Option<BandIndex>,
        row_index: Option<RowIndex>,
        store: Option<SketchStore>,
    },
    /// A partitioned table of this node: as a table, and an index led by the id on each of its
    /// leaf partitions, if each has one (a duplicate check reads them).
    Partitioned {
        band_index: Option<BandIndex>,
        row_index: Option<RowIndex>,
        leaves: Option<Vec<RowIndex>>,
        store: Option<SketchStore>,
    },
    /// A Citus table: its rows are on the workers, so a lookup runs its SQL queries, and the
    /// second verifies the candidates there (see `citus`).
    Citus,
}

impl Placement {
    /// The placement of the index `def` describes.
    fn of(def: &IndexDef) -> Placement {
        if citus::is_citus_table(def.band_table) {
            return Placement::Citus;
        }
        let band_index = BandIndex::find(
            def.band_table,
            def.key,
            def.format,
            def.settings.banding.bands,
        );
        let row_index = RowIndex::find(def.tbl, &def.id_column, def.key, false);
        let store = SketchStore::find(&def.members, &def.text, def.settings.shingling);
        if def.members.len() <= 1 {
            return Placement::Table {
                band_index,
                row_index,
                store,
            };
        }
        let leaf = |m: &&pg_sys::Oid| {
            // SAFETY: a catalog lookup by OID.
            unsafe { pg_sys::get_rel_relkind(**m) == pg_sys::RELKIND_RELATION as std::ffi::c_char }
        };
        let leaves = def.members[1..]
            .iter()
            .filter(leaf)
            .map(|&leaf| RowIndex::find(leaf, &def.id_column, def.key, true))
            .collect::<Option<Vec<_>>>();
        Placement::Partitioned {
            band_index,
            row_index,
            leaves,
            store,
        }
    }

    /// The table's sketch store (of every leaf), if it has one.
    pub(super) fn store(&self) -> Option<&SketchStore> {
        match self {
            Placement::Table { store, .. } | Placement::Partitioned { store, .. } => store.as_ref(),
            Placement::Citus => None,
        }
    }

    /// The band table's index, if a lookup may read it directly.
    pub(in crate::index) fn band_index(&self) -> Option<&BandIndex> {
        match self {
            Placement::Table { band_index, .. } | Placement::Partitioned { band_index, .. } => {
                band_index.as_ref()
            }
            Placement::Citus => None,
        }
    }

    /// The table's unique index on the id, through which a lookup reads texts directly.
    pub(super) fn row_index(&self) -> Option<RowIndex> {
        match self {
            Placement::Table { row_index, .. } | Placement::Partitioned { row_index, .. } => {
                *row_index
            }
            Placement::Citus => None,
        }
    }

    /// The indexes a duplicate check reads rows through: the table's index on the id, or one
    /// led by the id on each leaf partition; None if it lacks them.
    pub(in crate::index) fn check_row_indexes(&self) -> Option<&[RowIndex]> {
        match self {
            Placement::Table {
                row_index: Some(row_index),
                ..
            }
            | Placement::Partitioned {
                row_index: Some(row_index),
                ..
            } => Some(std::slice::from_ref(row_index)),
            Placement::Partitioned {
                leaves: Some(leaves),
                ..
            } => Some(leaves),
            _ => None,
        }
    }

    /// Whether the candidates of a lookup are verified where the rows are, by SQL.
    pub(super) fn verifies_remotely(&self) -> bool {
        matches!(self, Placement::Citus)
    }
}

/// An index as a lookup, a check or a sync reaches it.
pub(in crate::index) struct Index {
    pub(in crate::index) def: IndexDef,
    pub(in crate::index) placement: Placement,
    /// The lookup's two SQL queries (see [`Index::lookup_sql`]; of a Citus table, the second
    /// is [`Index::verify_sql`]).
    pub(in crate::index) sql: [String; 2],
    /// The query of a lookup that reads every row's sketch (see [`Index::scan_sql`]).
    pub(super) scan_sql: String,
    /// The queries through which a lookup that row-level security hides rows from learns
    /// which rows the caller may see (see [`Index::visible_sql`]).
    pub(super) visible_sql: [String; 2],
    /// Of a Citus table's index, the two queries of the lookups of many texts at
    /// once (`lookup::batch`): `(key, id, sketch1, sketch2)` of the band rows with one of the
    /// keys `$1`, then `(id, text)` of the rows with the ids `$1` (as the second query of a
    /// table of this node).
    pub(super) batch_sql: Option<[String; 2]>,
    /// Of an index of a Citus table distributed by a tenant, the lookup's queries within one
    /// tenant (`lookup::similar`): those of `sql`, `scan_sql` and `visible_sql`, with the
    /// tenant as their last parameter (`$2`, `$3`, `$6`, `$2` and `$1`), which Citus sends to
    /// the one shard that holds the tenant's rows.
    pub(super) tenant_sql: Option<[String; 5]>,
}

impl Index {
    /// The index named `name` (see [`Index::find`]); 42704 if there is none (40001 if
    /// the table has one that this transaction's snapshot predates, see
    /// [`refuse_newer_index`]).
    pub(in crate::index) fn get(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        name: pg_sys::Oid,
    ) -> Rc<Index> {
        Self::find(client, fn_oid, name, Self::of_table)
            .or_else(|| Self::default_of(&Self::of_citus_worker(client, fn_oid, name)))
            .unwrap_or_else(|| Self::missing(fn_oid, name))
    }

    /// The index named `name`, as [`Index::get`] finds it, for a whole-table search, which
    /// reads the table's rows and not its band rows: the band table is not checked (see
    /// [`IndexDef::check_band_ids`]); on a Citus worker, which keeps no catalog rows, 0A000.
    pub(in crate::index) fn of_rows(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        name: pg_sys::Oid,
    ) -> Rc<Index> {
        Self::find(client, fn_oid, name, Self::read_table).unwrap_or_else(|| {
            check_indexable(name);
            if citus::is_citus_table(name) && citus::is_worker() {
                raise(
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    format!(
                        "this node has no minhash catalog: {} is a Citus table, and this is a \
                         worker",
                        regclass_name(name)
                    ),
                    Some(
                        "Run this call on the coordinator, in a statement of its own: Citus \
                         sends a statement that reads one row of a distributed table whole to \
                         that row's worker."
                            .into(),
                    ),
                );
            }
            Self::missing(fn_oid, name)
        })
    }

    /// Raises the error for `name`, of which no index was found: 42809 for a relation that
    /// cannot have one, 42704 for a table that has none (40001 if it has one that this
    /// transaction's snapshot predates, see [`refuse_newer_index`]).
    fn missing(fn_oid: pg_sys::Oid, name: pg_sys::Oid) -> ! {
        check_indexable(name);
        // SAFETY: the relation is opened with a lock (or not found) and closed again; its
        // trigger descriptor is read while it is open.
        unsafe {
            let rel = pg_sys::try_table_open(name, pg_sys::AccessShareLock as i32);
            if !rel.is_null() {
                let ext = Extension::of_function(fn_oid);
                let indexed = has_sync_trigger((*rel).trigdesc, ext);
                pg_sys::table_close(rel, pg_sys::NoLock as i32);
                if indexed {
                    refuse_newer_index(name);
                }
            }
        }
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("table {} has no minhash index", regclass_name(name)),
            Some("Create one with minhash_index_create(table, id_column, text_column).".into()),
        )
    }

    /// The index named `name`: the default index of table `name` (see [`Index::default_of`]),
    /// or the index whose band table `name` is, among the indexes of a table as `of_table`
    /// reads them.
    fn find(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        name: pg_sys::Oid,
        of_table: fn(&SpiClient<'_>, pg_sys::Oid, pg_sys::Oid) -> Indexes,
    ) -> Option<Rc<Index>> {
        if let Some(index) = Self::default_of(&of_table(client, fn_oid, name)) {
            return Some(index);
        }
        let schema = Extension::of_function(fn_oid).quoted_schema();
        let sql = format!(
            "SELECT i.tbl::pg_catalog.oid FROM {schema}.minhash_indexes i
             WHERE i.band_table OPERATOR(pg_catalog.=) $1"
        );
        let tbl = with_prepared(
            client,
            &sql,
            PgOid::BuiltIn(PgBuiltInOids::OIDOID),
            name.into(),
            |table| {
                if table.is_empty() {
                    return Ok(None);
                }
                table.first().get::<pg_sys::Oid>(1)
            },
        )?;
        of_table(client, fn_oid, tbl)
            .iter()
            .find(|cfg| cfg.def.band_table == name)
            .cloned()
    }

    /// The indexes of `tbl` (none if it has none), as [`Index::read_table`] reads them, each with
    /// the band table it reads and writes checked ([`IndexDef::check_band_ids`]).
    pub(in crate::index) fn of_table(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
    ) -> Indexes {
        let cfgs = Self::read_table(client, fn_oid, tbl);
        for cfg in cfgs.iter() {
            cfg.def.check_band_ids();
        }
        cfgs
    }

    /// The indexes of `tbl` (none if it has none), from this backend's cache when nothing has
    /// changed since they were read (see [`IndexDef::read`]), each band table locked. (A
    /// lookup asks `IndexDef::snapshot_predates` before it reads the band table.)
    fn read_table(client: &SpiClient<'_>, fn_oid: pg_sys::Oid, tbl: pg_sys::Oid) -> Indexes {
        if let Some(cfgs) = cached(tbl) {
            // Lock what the lookup reads, as its first read would; that brings in every
            // invalidation committed meanwhile (a dropped index, a changed row, a format
            // conversion it waited for), and the entry is used only if it survives them. The
            // locks then keep the band table's indexes from being dropped until the transaction
            // ends.
            // SAFETY: locks by OID; a relation dropped meanwhile is locked harmlessly.
            unsafe {
                pg_sys::LockRelationOid(tbl, pg_sys::AccessShareLock as i32);
                for cfg in cfgs.iter() {
                    pg_sys::LockRelationOid(cfg.def.band_table, pg_sys::AccessShareLock as i32);
                }
            }
            if let Some(cfgs) = cached(tbl) {
                return cfgs;
            }
        }
        // The table first: minhash_index_drop takes it before it drops the band table, so the
        // band table read next cannot go away before this transaction ends; `IndexDef::read`
        // locks the band tables before it checks their rows.
        // SAFETY: a lock by OID, as above.
        unsafe { pg_sys::LockRelationOid(tbl, pg_sys::AccessShareLock as i32) };
        let schema = Extension::of_function(fn_oid).quoted_schema();
        let cfgs: Indexes = IndexDef::read(client, fn_oid, tbl)
            .into_iter()
            .map(|def| Rc::new(Index::new(&schema, def)))
            .collect();
        if !cfgs.is_empty() {
            INDEXES.with_borrow_mut(|configs| configs.insert(tbl, Rc::clone(&cfgs)));
        }
        cfgs
    }

    /// The indexes of `tbl` that the arguments of a sync trigger on a shard of it carry (see
    /// `citus`): each a catalog row as JSON; those of other tables are left out.
    pub(in crate::index) fn of_trigger(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
        args: &[String],
    ) -> Indexes {
        let schema = Extension::of_function(fn_oid).quoted_schema();
        IndexDef::of_trigger_args(client, fn_oid, tbl, args)
            .into_iter()
            .map(|def| {
                def.check_band_ids();
                Rc::new(Index::new(&schema, def))
            })
            .collect()
    }

    /// Of a Citus table on a worker, which has no catalog rows (a call Citus sent there with a
    /// query of one shard, or made on the worker): the indexes its insert sync trigger there
    /// carries, checked as a shard's are (see `citus`); none elsewhere.
    fn of_citus_worker(client: &SpiClient<'_>, fn_oid: pg_sys::Oid, tbl: pg_sys::Oid) -> Indexes {
        if !citus::is_citus_table(tbl) {
            return Rc::from([]);
        }
        // SAFETY: the relation is opened with a lock (or not found) and closed again; its
        // trigger descriptor is read while it is open.
        let args = unsafe {
            let rel = pg_sys::try_table_open(tbl, pg_sys::AccessShareLock as i32);
            if rel.is_null() {
                return Rc::from([]);
            }
            let args = citus::sync_trigger_args(rel, None, Extension::of_function(fn_oid));
            pg_sys::table_close(rel, pg_sys::NoLock as i32);
            args
        };
        Self::of_trigger(client, fn_oid, tbl, &args)
    }

    /// The default index among a table's `indexes` (none if it has none): what a call that
    /// names the table, or a duplicate check that names no index, reads. It is the table's
    /// first, the one whose band table has the lowest OID (on the coordinator, for a Citus
    /// table, in whose order the shards' triggers carry the indexes), as `_minhash_index` in
    /// src/index/sql/build.sql picks it: another index never changes it.
    pub(in crate::index) fn default_of(indexes: &Indexes) -> Option<Rc<Index>> {
        indexes.first().cloned()
    }

    /// The index `def` describes, as a lookup reaches it, for the extension in `schema`.
    fn new(schema: &str, def: IndexDef) -> Index {
        let placement = Placement::of(&def);
        let mut sql = Self::lookup_sql(&def);
        let (mut batch_sql, mut tenant_sql) = (None, None);
        if placement.verifies_remotely() {
            let rows = std::mem::replace(&mut sql[1], Self::verify_sql(schema, &def));
            let [bands, keyed] = Self::citus_band_sql(&def);
            sql[0] = bands;
            batch_sql = Some([keyed, rows]);
            tenant_sql = def.tenant.as_ref().map(|tenant| {
                let equal = equality_operator(tenant.key.oid);
                let column = quote_ident_str(&tenant.column);
                let [among, all] = Self::visible_sql(&def);
                [
                    format!("{} AND b.tenant {equal} $2", sql[0]),
                    format!("{} AND t.{column} {equal} $3", sql[1]),
                    Self::scan_sql(&def, &format!(" WHERE b.tenant {equal} $6")),
                    format!("{among} AND t.{column} {equal} $2"),
                    format!("{all} WHERE t.{column} {equal} $1"),
                ]
            });
        }
        let scan_sql = Self::scan_sql(&def, "");
        let visible_sql = Self::visible_sql(&def);
        Index {
            def,
            placement,
            sql,
            scan_sql,
            visible_sql,
            batch_sql,
            tenant_sql,
        }
    }

    /// The queries a lookup runs as the caller where row-level security hides rows of the table
    /// from it (`lookup`), whose policies filter the rows before anything else reads them: the
    /// ids of the rows with the ids `$1` (one int8[] or id-type array parameter), through the
    /// table's unique index on the id; then the ids of every row.
    fn visible_sql(def: &IndexDef) -> [String; 2] {
        let id = quote_ident_str(&def.id_column);
        let cast = if def.key.integer {
            "::pg_catalog.int8"
        } else {
            ""
        };
        let all = format!("SELECT t.{id}{cast} FROM {} t", qualified_name(def.tbl));
        [
            format!("{all} WHERE t.{id} OPERATOR(pg_catalog.=) ANY ($1)"),
            all,
        ]
    }

    /// The query of a lookup that reads the band sketch of every row (`lookup`): `(id,
    /// differing)` of the band rows whose sketch differs from the text's `($1, $2)` in at most
    /// `$5` of the bits the masks `($3, $4)` keep, fewest differing first, then by id. Of
    /// format 1, each row's sketch comes once per band, and its band rows one after another.
    fn scan_sql(def: &IndexDef, filter: &str) -> String {
        let differing = |column: &str, sketch: usize, mask: usize| {
            format!(
                "pg_catalog.bit_count(((b.{column} OPERATOR(pg_catalog.#) ${sketch}) \
                 OPERATOR(pg_catalog.&) ${mask})::pg_catalog.bit(64))"
            )
        };
        format!(
            "SELECT s.id, s.differing FROM (
                 SELECT b.id, {} OPERATOR(pg_catalog.+) {} AS differing FROM {} b{filter}) s
             WHERE s.differing OPERATOR(pg_catalog.<=) $5
             ORDER BY s.differing, s.id",
            differing("sketch1", 1, 3),
            differing("sketch2", 2, 4),
            qualified_name(def.band_table)
        )
    }

    /// The two queries of a lookup, each with one int8[] parameter: `(id, sketch1, sketch2)`
    /// of the band rows with one of the keys `$1` (band i's key `$1[i]`), read from the band
    /// table's `(key, id) INCLUDE (sketch1, sketch2)` index alone (an index-only scan; of format
    /// 2, through each band's B-tree), for when those cannot be read directly (see `btree`); then `(id, text)` of the rows with the ids `$1`, through
    /// the table's unique index on the id.
    fn lookup_sql(def: &IndexDef) -> [String; 2] {
        let (tbl, band_table, key) = (def.tbl, def.band_table, def.key);
        let (id, text) = (
            quote_ident_str(&def.id_column),
            def.text.caller_sql(band_table, "t"),
        );
        // integer ids of any width come as int8, like the band table stores them
        let cast = if key.integer { "::pg_catalog.int8" } else { "" };
        let bands = qualified_name(band_table);
        let band_rows = match def.format {
            BandFormat::PerBand => format!(
                "SELECT b.id, b.sketch1, b.sketch2 FROM {bands} b
                 WHERE b.key OPERATOR(pg_catalog.=) ANY ($1)"
            ),
            // (one scan of band i's B-tree for band i's key)
            BandFormat::PerRow => (0..def.settings.banding.bands)
                .map(|band| {
                    format!(
                        "SELECT b.id, b.sketch1, b.sketch2 FROM {bands} b
                         WHERE b.{column} OPERATOR(pg_catalog.=) $1[{i}]",
                        column = def.format.key_column(band),
                        i = band + 1,
                    )
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL "),
        };
        [
            band_rows,
            format!(
                "SELECT t.{id}{cast}, {text}::pg_catalog.text FROM {tbl} t
                 WHERE t.{id} OPERATOR(pg_catalog.=) ANY ($1)",
                tbl = qualified_name(tbl),
            ),
        ]
    }

    /// The band queries of a lookup of an index of a Citus table, each one fan-out to the band
    /// shards (of format 2, one condition per band's key rather than a `UNION ALL`, which Citus
    /// would run as one fan-out per band): `(id, sketch1, sketch2)` of the band rows with one of
    /// the keys `$1` (band i's key `$1[i]`); then `(key, id, sketch1, sketch2)` of those with any
    /// of the keys `$1`, of any band (a key's top bits are its band), for `lookup::batch`.
    fn citus_band_sql(def: &IndexDef) -> [String; 2] {
        let bands = qualified_name(def.band_table);
        match def.format {
            BandFormat::PerBand => [
                format!(
                    "SELECT b.id, b.sketch1, b.sketch2 FROM {bands} b
                     WHERE b.key OPERATOR(pg_catalog.=) ANY ($1)"
                ),
                format!(
                    "SELECT b.key, b.id, b.sketch1, b.sketch2 FROM {bands} b
                     WHERE b.key OPERATOR(pg_catalog.=) ANY ($1)"
                ),
            ],
            BandFormat::PerRow => {
                let columns =
                    (0..def.settings.banding.bands).map(|band| def.format.key_column(band));
                let any_band = |condition: &dyn Fn(usize, &str) -> String| {
                    columns
                        .clone()
                        .enumerate()
                        .map(|(band, column)| condition(band, &column))
                        .collect::<Vec<_>>()
                        .join(" OR ")
                };
                let keys = columns
                    .clone()
                    .map(|column| format!("b.{column}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                [
                    format!(
                        "SELECT b.id, b.sketch1, b.sketch2 FROM {bands} b WHERE ({})",
                        any_band(&|band, column| format!(
                            "b.{column} OPERATOR(pg_catalog.=) $1[{}]",
                            band + 1
                        ))
                    ),
                    format!(
                        "SELECT k.key, b.id, b.sketch1, b.sketch2 FROM {bands} b
                         CROSS JOIN LATERAL pg_catalog.unnest(ARRAY[{keys}]) k(key)
                         WHERE ({}) AND k.key OPERATOR(pg_catalog.=) ANY ($1)",
                        any_band(&|_, column| format!(
                            "b.{column} OPERATOR(pg_catalog.=) ANY ($1)"
                        ))
                    ),
                ]
            }
        }
    }

    /// The second query of a lookup of an index of a Citus table: `(id, similarity)` of the rows
    /// with the ids `$1` and their exact Jaccard similarity to the text `$2`, which Citus
    /// computes on the workers, each for the rows of its shards.
    fn verify_sql(schema: &str, def: &IndexDef) -> String {
        let (id, text) = (
            quote_ident_str(&def.id_column),
            def.text.caller_sql(def.band_table, "t"),
        );
        let cast = if def.key.integer {
            "::pg_catalog.int8"
        } else {
            ""
        };
        let (ngram, unit) = (
            def.settings.shingling.ngram,
            def.settings.shingling.unit.name(),
        );
        format!(
            "SELECT t.{id}{cast}, {schema}.jaccard({text}::pg_catalog.text, $2, {ngram}, {unit})
             FROM {tbl} t
             WHERE t.{id} OPERATOR(pg_catalog.=) ANY ($1) AND {text} IS NOT NULL",
            tbl = qualified_name(def.tbl),
            unit = quote_literal(unit),
        )
    }
}
