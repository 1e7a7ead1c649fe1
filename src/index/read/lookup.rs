//! A lookup of one text in an index: the rows at or above a threshold, or the k most similar,
//! most similar first. Candidates come from the band rows sharing a band key with the text,
//! filtered by their band sketches, and where the band keys do not suffice for the similarity
//! asked (`core::nearest`), from a sweep of the table's sketch store (`store`) or, without
//! one, a scan of every row's band sketch; their texts are read
//! straight through the indexes (`btree`) where the placement allows, or through statements
//! prepared once per backend, and verified with exact Jaccard here, or on the workers of a
//! Citus table.

use std::collections::{HashMap, HashSet};
use std::ffi::c_char;
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, PgSqlErrorCode};

use crate::core::capacity;
use crate::core::fine::{min_equal_slots, Shortlist, FINE_MISS_PROBABILITY};
use crate::core::jaccard::{JaccardProbe, ShingleSet};
use crate::core::nearest::{keys_suffice, max_differing_bits, Ranked, LOWEST_SCANNED_THRESHOLD};
use crate::core::sketch::{
    equal_bits, min_equal_bits, BandSketch, BAND_SKETCH_BITS, LOOKUP_SKETCH_MISS_PROBABILITY,
};
use crate::pg::backend::interrupts;
use crate::pg::error::raise;
use crate::pg::names::regclass_name;

use super::access_plan::Index;
use super::btree::{BandIndex, RowIndex};
use super::sketch_store::{text_sketch, SketchStore, StoreRow};
use crate::index::def::band::band_entry;
use crate::index::def::citus::nested_execution;
use crate::index::def::row_id::Id;
use crate::index::run::owner::{as_owner, relation_owner};
use crate::index::run::prepared::{with_cursor, with_prepared, with_prepared_args};
use crate::index::run::spi::{for_each_spi_row, for_each_text_row, spi_failed};

/// What one lookup did, step by step (`minhash_explain` shows it).
#[derive(Default)]
pub(super) struct Trace {
    /// The band keys probed: one per band, none for a text without shingles.
    pub(super) keys: usize,
    /// The band table's index read directly (the first of them), or None for its SQL query, as
    /// the owner; how many it reads.
    pub(super) band_index: Option<pg_sys::Oid>,
    pub(super) band_indexes: usize,
    /// The band rows sharing a key with the text (other than the excluded row's).
    pub(super) band_rows: usize,
    /// The sketch bits a band row must share with the text's to be verified (of at most 128).
    pub(super) min_bits: usize,
    /// The band rows that passed, and their distinct ids: the candidates verified.
    pub(super) passed: usize,
    pub(super) candidates: usize,
    /// Where the candidates' texts were read: the table's unique index directly, or None
    /// for its SQL query; whether on the workers of a Citus table.
    pub(super) row_index: Option<pg_sys::Oid>,
    pub(super) remote: bool,
    /// The scan of every row's sketch, where the band keys did not suffice.
    pub(super) scan: Option<ScanTrace>,
    /// The rows returned.
    pub(super) found: usize,
    /// Whether row-level security hides rows from the caller: the counts above are then of the
    /// rows it may see (its query of them ran before anything else was done with them).
    pub(super) visible_only: bool,
    /// Time spent finding the candidates, and verifying them (the scan included).
    pub(super) finding: Duration,
    pub(super) verifying: Duration,
}

/// What the scan of every row's sketch did.
#[derive(Default)]
pub(super) struct ScanTrace {
    /// The similarity a row needed when the scan began, and when it ended.
    pub(super) from_bar: f64,
    pub(super) to_bar: f64,
    /// The most sketch bits a row could differ in to be read, at the start.
    pub(super) max_differing: usize,
    /// The band rows read, and the rows among them verified (not verified before).
    pub(super) rows_read: usize,
    pub(super) verified: usize,
    /// Whether the band table was read directly (`btree::BandHeap`), rather than by SQL.
    pub(super) direct: bool,
    /// Of a sweep of the sketch store (rather than the band table): its indexes, the fine
    /// sketch slots a row had to agree in at the start, and the sweeps made (a second where
    /// the first kept too few rows for the bar it reached).
    pub(super) store: Vec<pg_sys::Oid>,
    pub(super) min_slots: u32,
    pub(super) sweeps: usize,
}

/// What a lookup returns: the rows at least `floor` similar to the text, or with `k` only the
/// k most similar of them; with `scan`, where the band keys alone would not find a row at the
/// bar (`core::nearest`) with the recall the index was built for, every row's sketch is read
/// too (without a sketch store the caller may read, a lookup without `k` scans only from
/// [`LOWEST_SCANNED_THRESHOLD`] up).
#[derive(Clone, Copy)]
pub(super) struct Want {
    pub(super) floor: f64,
    pub(super) k: Option<usize>,
    pub(super) scan: bool,
}

impl Want {
    /// The rows at or above `threshold`, found through the band keys alone.
    pub(super) fn keys_only(threshold: f64) -> Want {
        Want {
            floor: threshold,
            k: None,
            scan: false,
        }
    }

    /// The rows at or above `floor` (the k most similar of them), by the band keys and where
    /// they do not suffice by a scan of every row's sketch (`store`: whether the caller may
    /// read a sketch store of the index's table).
    pub(super) fn complete(floor: f64, k: Option<usize>, store: bool) -> Want {
        Want {
            floor,
            k,
            scan: k.is_some() || store || floor >= LOWEST_SCANNED_THRESHOLD,
        }
    }
}

/// The rows at least `threshold` similar to `doc`, most similar first (ties by id), leaving
/// out `exclude_id`, through the band keys alone (the duplicate check's lookup). A row sharing
/// a band key with `doc` is fetched and verified only if its band sketch agrees with `doc`'s in
/// enough bits (`core::sketch`): that drops a row at or above the threshold with probability at
/// most [`LOOKUP_SKETCH_MISS_PROBABILITY`]. With `tenant` (of an index of a Citus table
/// distributed by a tenant, `Index::tenant_sql`), among the rows of that tenant only: Citus
/// sends each query to the one shard that holds them, on this node when the duplicate trigger
/// of one of them runs it (no connection to another node; the rows this transaction wrote
/// there are seen).
pub(in crate::index) fn similar(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    threshold: f64,
    (exclude_id, tenant): (Option<&Id>, Option<&Id>),
) -> Vec<(Id, f64)> {
    traced(
        cfg,
        client,
        doc,
        Want::keys_only(threshold),
        (exclude_id, None, tenant),
        &mut Trace::default(),
    )
}

/// The rows `want` asks for, most similar first (ties by id), leaving out `exclude_id`,
/// recording what it did in `trace`. First the rows sharing a band key with `doc` (as
/// [`similar`]); then, if `want` allows and the band keys do not suffice at the bar, the rows
/// whose band sketch differs from `doc`'s in few enough bits to be at the bar except with
/// probability `core::nearest::SCAN_SKETCH_MISS_PROBABILITY`, fewest differing first, until the rest
/// cannot reach it.
///
/// With `among`, only rows whose ids it holds are candidates: the rows `want` asks for among
/// them, `k` counted among them. Where a scan of every row's sketch may be needed (`k`, or a
/// floor at which the band keys do not suffice) and `among` holds few enough ids
/// ([`among_verified_directly`]), those rows are verified directly instead: exactly what brute
/// force over them returns.
///
/// With `tenant` (of an index of a Citus table distributed by a tenant), only the rows of that
/// tenant are found.
///
/// Of a Citus table, the queries run with `citus::nested_execution`: a lookup may run inside
/// a query of a shard (the duplicate trigger on a shard, or a call Citus sent to a worker).
pub(super) fn traced(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    want: Want,
    rows: (Option<&Id>, Option<&HashSet<Id>>, Option<&Id>),
    trace: &mut Trace,
) -> Vec<(Id, f64)> {
    if cfg.placement.verifies_remotely() {
        nested_execution(|| traced_here(cfg, client, doc, want, rows, trace))
    } else {
        traced_here(cfg, client, doc, want, rows, trace)
    }
}

/// The most ids of a lookup's `among` that it verifies one by one rather than scan every
/// row's sketch, on any table: about 15 ms of verification of short texts.
const AMONG_VERIFIED_DIRECTLY: usize = 4096;

/// Of a larger table, `among` is verified one by one up to one id per this many rows of the
/// table: a scan for `k` reads every row's sketch and verifies thousands of rows besides, about
/// what verifying one id per 16 rows costs (1,000,000 questions, `k => 10`: 10,000 ids
/// verified one by one in 35 ms; 50,000 ids through the scan in 310 ms; SQL brute force over
/// them, 69 and 118 ms).
const ROWS_PER_AMONG_VERIFIED: f64 = 16.0;

/// The most ids of `among` a lookup verifies one by one (see [`AMONG_VERIFIED_DIRECTLY`]),
/// from the estimated row count (`pg_class.reltuples`) of the indexed table's `members` (the
/// table, or the tables of its partition tree; -1, never analyzed, counts as none).
fn among_verified_directly(members: &[pg_sys::Oid]) -> usize {
    let rows: f64 = members
        .iter()
        .map(|&member| {
            // SAFETY: the relation is opened by OID (NULL if gone), its pg_class row read while
            // it is open, and closed; the lookup's lock on it is kept.
            unsafe {
                let rel = pg_sys::try_table_open(member, pg_sys::AccessShareLock as i32);
                if rel.is_null() {
                    return 0.0;
                }
                let class = &*(*rel).rd_rel;
                // (a partitioned table's own count, if any, is its partitions')
                let partitioned = class.relkind == pg_sys::RELKIND_PARTITIONED_TABLE as c_char;
                let rows = if partitioned {
                    0.0
                } else {
                    class.reltuples.max(0.0)
                };
                pg_sys::table_close(rel, pg_sys::NoLock as i32);
                f64::from(rows)
            }
        })
        .sum();
    AMONG_VERIFIED_DIRECTLY.max((rows / ROWS_PER_AMONG_VERIFIED) as usize)
}

/// [`traced`], with the queries run as they come.
fn traced_here(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    want: Want,
    (exclude_id, among, tenant): (Option<&Id>, Option<&HashSet<Id>>, Option<&Id>),
    trace: &mut Trace,
) -> Vec<(Id, f64)> {
    let start = Instant::now();
    // (where the band keys may not suffice: with `k`, or below the threshold they suffice at)
    let may_scan =
        want.scan && (want.k.is_some() || !keys_suffice(want.floor, cfg.def.settings.banding));
    // the candidates, and the text's band sketch for a scan of every row's (none where the
    // rows of `among` are all verified)
    // no shingles, no band keys: nothing is a candidate (such texts are not indexed)
    let Some((keys, sketch)) = band_entry(doc, &cfg.def.settings) else {
        return Vec::new();
    };
    // Where row-level security hides rows from the caller, nothing is done with a hidden row
    // but reading its band rows under the text's keys and asking the caller's query for it: a
    // lookup's time tells no more of the rows hidden from it than the number under those keys.
    let hidden = cfg.def.hides_rows();
    let direct = among.filter(|a| may_scan && a.len() <= among_verified_directly(&cfg.def.members));
    let (ids, sketch) = match direct {
        Some(among) => {
            let mut ids: Vec<Id> = among
                .iter()
                .filter(|&id| Some(id) != exclude_id)
                .cloned()
                .collect();
            ids.sort_unstable();
            *trace = Trace {
                candidates: ids.len(),
                ..Trace::default()
            };
            (ids, None)
        }
        None => {
            let entry = (keys, sketch);
            let rows = (exclude_id, among, tenant);
            let ids = band_candidates(cfg, client, entry, (want, hidden), rows, trace);
            (ids, Some(sketch))
        }
    };
    trace.visible_only = hidden;
    trace.remote = cfg.placement.verifies_remotely();
    trace.finding = start.elapsed();
    let start = Instant::now();
    let mut ranked = Ranked::new(want.k, want.floor);
    if !ids.is_empty() {
        trace.row_index = verify(cfg, client, doc, (&ids, tenant), &mut ranked);
    }
    let scan_from =
        sketch.filter(|_| want.scan && !keys_suffice(ranked.bar(), cfg.def.settings.banding));
    if let Some(sketch) = scan_from {
        // (the rows the band keys found were verified already)
        let mut verified: HashSet<Id> = ids.into_iter().collect();
        if let Some(id) = exclude_id {
            verified.insert(id.clone());
        }
        let store = cfg
            .placement
            .store()
            .filter(|store| tenant.is_none() && store.readable());
        if let Some(store) = store {
            let rows = (&verified, among);
            trace.scan = Some(sweep_store(cfg, store, doc, rows, &mut ranked));
            let found = ranked.into_rows();
            trace.found = found.len();
            trace.verifying = start.elapsed();
            return found;
        }
        // (where rows are hidden, only those the caller's query of every row shows)
        let shown = hidden.then(|| visible_rows(cfg, client, None, tenant));
        let scanned = scan(
            cfg,
            client,
            doc,
            sketch,
            (&verified, among, tenant),
            shown.as_ref(),
            &mut ranked,
        );
        trace.scan = Some(scanned.0);
        trace.row_index = trace.row_index.or(scanned.1);
    }
    let found = ranked.into_rows();
    trace.found = found.len();
    trace.verifying = start.elapsed();
    found
}

/// The rows sharing a band key with a text of band entry `(keys, sketch)` whose band sketch
/// agrees with its in enough bits for `want.floor` (other than `exclude_id`, and in `among` if
/// given), sorted; the band table's part of `trace`. With `hidden` (row-level security hides
/// rows from the caller), of the rows the caller's query of the rows under the keys returns.
fn band_candidates(
    cfg: &Index,
    client: &SpiClient<'_>,
    (keys, sketch): (Vec<i64>, BandSketch),
    (want, hidden): (Want, bool),
    (exclude_id, among, tenant): (Option<&Id>, Option<&HashSet<Id>>, Option<&Id>),
    trace: &mut Trace,
) -> Vec<Id> {
    let min_bits = min_equal_bits(
        cfg.def.settings.k,
        want.floor,
        LOOKUP_SKETCH_MISS_PROBABILITY,
    );
    let tenant_param = tenant_arg(cfg, tenant);
    let bands_sql = match (&tenant_param, &cfg.tenant_sql) {
        (Some(_), Some([bands_sql, ..])) => bands_sql,
        _ => &cfg.sql[0],
    };
    let mut rows = Vec::new();
    let mut keep = |id: Id, row_sketch: [u64; 2]| {
        if Some(&id) == exclude_id || among.is_some_and(|among| !among.contains(&id)) {
            return;
        }
        capacity::push(&mut rows, (id, row_sketch), "the band rows of a lookup")
            .unwrap_or_else(|e| e.fail());
    };
    let band_index = cfg.placement.band_index().filter(|index| index.usable());
    let probed = keys.len();
    // The band table is private to the table's owner: read it directly (the caller's
    // right to see the results was checked by the caller of `similar`), or through SQL as
    // the owner.
    match band_index {
        Some(index) => index.scan(&keys, &mut keep),
        None => as_owner(relation_owner(cfg.def.tbl), || {
            let mut types = vec![PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID)];
            let mut args = vec![keys.into()];
            if let Some((arg, arg_type)) = tenant_param {
                types.push(arg_type);
                args.push(arg);
            }
            with_prepared_args(client, bands_sql, &types, &args, |table| {
                for_each_spi_row(table, |row| {
                    if let (Some(id), Some(s1), Some(s2)) = (
                        cfg.def.key.spi_id(row, 1)?,
                        row.get::<i64>(2)?,
                        row.get::<i64>(3)?,
                    ) {
                        keep(id, [s1 as u64, s2 as u64]);
                    }
                    Ok(())
                })
            })
        }),
    }
    let shown = hidden.then(|| {
        let mut under_keys: Vec<Id> = rows.iter().map(|(id, _)| id.clone()).collect();
        under_keys.sort_unstable();
        under_keys.dedup();
        visible_rows(cfg, client, Some(&under_keys), tenant)
    });
    let mut ids = Vec::new();
    let (mut band_rows, mut passed) = (0, 0);
    for (id, row_sketch) in rows {
        if shown.as_ref().is_some_and(|shown| !shown.contains(&id)) {
            continue;
        }
        band_rows += 1;
        if equal_bits(sketch, row_sketch, cfg.def.settings.k) >= min_bits {
            passed += 1;
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    *trace = Trace {
        keys: probed,
        band_index: band_index.map(|index| index.oid()),
        band_indexes: band_index.map_or(0, |index| index.count()),
        band_rows,
        min_bits,
        passed,
        candidates: ids.len(),
        ..Trace::default()
    };
    ids
}

/// The rows the caller may see (where row-level security hides rows from it): those of `ids`
/// (sorted, distinct) or, without, every row of the table, of `tenant` if given; read by the
/// caller's query of them (`Index::visible_sql`), whose policies filter them.
fn visible_rows(
    cfg: &Index,
    client: &SpiClient<'_>,
    ids: Option<&[Id]>,
    tenant: Option<&Id>,
) -> HashSet<Id> {
    let mut shown = HashSet::new();
    if ids.is_some_and(|ids| ids.is_empty()) {
        return shown;
    }
    let (mut args, mut types) = (Vec::new(), Vec::new());
    if let Some(ids) = ids {
        let (arg, arg_type) = cfg.def.key.array_arg(ids);
        args.push(arg);
        types.push(arg_type);
    }
    let tenant = tenant_arg(cfg, tenant);
    let [among_sql, all_sql] = &cfg.visible_sql;
    let sql = match (&tenant, &cfg.tenant_sql, ids) {
        (Some(_), Some([.., among_sql, _]), Some(_)) => among_sql,
        (Some(_), Some([.., all_sql]), None) => all_sql,
        (_, _, Some(_)) => among_sql,
        (_, _, None) => all_sql,
    };
    if let Some((arg, arg_type)) = tenant {
        args.push(arg);
        types.push(arg_type);
    }
    with_prepared_args(client, sql, &types, &args, |table| {
        capacity::reserve_set(&mut shown, table.len(), "the rows a lookup may show")
            .unwrap_or_else(|e| e.fail());
        for_each_spi_row(table, |row| {
            if let Some(id) = cfg.def.key.spi_id(row, 1)? {
                shown.insert(id);
            }
            Ok(())
        })
    });
    shown
}

/// Tenant `tenant` as an SPI argument of the queries of `cfg.tenant_sql`, and its type; None
/// without a tenant (55000 for an index with a tenant but no such queries).
fn tenant_arg(
    cfg: &Index,
    tenant: Option<&Id>,
) -> Option<(pgrx::datum::DatumWithOid<'static>, PgOid)> {
    let key = cfg.def.tenant.as_ref()?.key;
    let tenant = tenant?;
    // (a band table no longer a Citus table beside its table would read every tenant's rows)
    if cfg.tenant_sql.is_none() {
        raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the band table of {} is not distributed beside its table",
                regclass_name(cfg.def.tbl)
            ),
            Some("Drop the index with minhash_index_drop() and create it again.".into()),
        );
    }
    // SAFETY: a datum of the tenant column's type, made just now.
    let arg = unsafe { pgrx::datum::DatumWithOid::new(key.datum(tenant), key.oid) };
    Some((arg, PgOid::from(key.oid)))
}

/// The texts whose lookups [`batch`] makes at once.
pub(super) const BATCH_TEXTS: usize = 256;

/// The lookups of `docs` (up to [`BATCH_TEXTS`]) in an index of a Citus table, each what
/// [`traced`] returns for it with `want`, in two queries for them all, each one fan-out to the
/// shards (`Index::batch_sql`; one lookup per text makes two per text): the band rows with any
/// of their keys, as the owner; then the texts of every candidate the band sketches keep,
/// with the caller's rights, verified here. None where a lookup may need to scan every
/// row's sketch (`k`, or a floor at which the band keys do not suffice), where row-level
/// security hides rows from the caller, or where the index has no such queries.
pub(super) fn batch(
    cfg: &Index,
    client: &SpiClient<'_>,
    docs: &[Option<String>],
    want: Want,
) -> Option<Vec<Vec<(Id, f64)>>> {
    let [bands_sql, rows_sql] = cfg.batch_sql.as_ref()?;
    // (nor where row-level security hides rows from the caller: see `traced_here`)
    if want.k.is_some()
        || (want.scan && !keys_suffice(want.floor, cfg.def.settings.banding))
        || cfg.def.hides_rows()
    {
        return None;
    }
    let def = &cfg.def;
    let (k, shingling, floor) = (def.settings.k, def.settings.shingling, want.floor);
    let entries: Vec<_> = docs
        .iter()
        .map(|doc| {
            let doc = doc.as_deref()?;
            band_entry(doc, &def.settings)
        })
        .collect();
    let mut keys: Vec<i64> = entries
        .iter()
        .flatten()
        .flat_map(|(keys, _)| keys.clone())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    nested_execution(|| {
        let mut band_rows: HashMap<i64, Vec<(Id, [u64; 2])>> = HashMap::new();
        if !keys.is_empty() {
            let keys_type = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
            as_owner(relation_owner(def.tbl), || {
                with_prepared(client, bands_sql, keys_type, keys.into(), |table| {
                    for_each_spi_row(table, |row| {
                        if let (Some(key), Some(id), Some(s1), Some(s2)) = (
                            row.get::<i64>(1)?,
                            def.key.spi_id(row, 2)?,
                            row.get::<i64>(3)?,
                            row.get::<i64>(4)?,
                        ) {
                            let rows = band_rows.entry(key).or_default();
                            rows.push((id, [s1 as u64, s2 as u64]));
                        }
                        Ok(())
                    })
                })
            });
        }
        // (each text's candidates are found twice rather than kept: in a crowded bucket
        // they are every row of it, for each text)
        let min_bits = min_equal_bits(k, floor, LOOKUP_SKETCH_MISS_PROBABILITY);
        let candidates = |entry: &Option<(Vec<i64>, BandSketch)>| {
            let Some((keys, sketch)) = entry else {
                return Vec::new();
            };
            let mut ids: Vec<Id> = keys
                .iter()
                .filter_map(|key| band_rows.get(key))
                .flatten()
                .filter(|(_, row_sketch)| equal_bits(*sketch, *row_sketch, k) >= min_bits)
                .map(|(id, _)| id.clone())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let mut wanted: HashSet<Id> = HashSet::new();
        for entry in &entries {
            interrupts();
            wanted.extend(candidates(entry));
        }
        let wanted: Vec<Id> = wanted.into_iter().collect();
        let mut sets: HashMap<Id, ShingleSet> = HashMap::new();
        if !wanted.is_empty() {
            let (arg, arg_type) = def.key.array_arg(&wanted);
            with_prepared(client, rows_sql, arg_type, arg, |table| {
                for_each_text_row(table, |id, text| {
                    // SAFETY: the query selects the id as the band table stores it.
                    let id = unsafe { def.key.id(id, pg_sys::INT8OID) };
                    sets.insert(id, ShingleSet::new(text, shingling, &mut interrupts));
                })
            });
        }
        Some(
            docs.iter()
                .zip(&entries)
                .map(|(doc, entry)| {
                    let mut ranked = Ranked::new(None, floor);
                    let ids = candidates(entry);
                    if let (Some(doc), false) = (doc, ids.is_empty()) {
                        let query = ShingleSet::new(doc, shingling, &mut interrupts);
                        for id in ids {
                            interrupts();
                            if let Some(similarity) = sets.get(&id).map(|set| set.jaccard(&query)) {
                                if similarity >= floor {
                                    ranked.offer(id, similarity);
                                }
                            }
                        }
                    }
                    ranked.into_rows()
                })
                .collect(),
        )
    })
}

/// The rows fetched from the scan's cursor at a time: few at first, so that a `k` lookup's
/// bar rises before many rows are verified, then more.
const SCAN_FIRST_BATCH: i64 = 64;
const SCAN_LAST_BATCH: i64 = 4096;

/// Of a `k` lookup's sweep of the sketch store, the rows kept at most per row asked (and at
/// least [`STORE_MIN_KEPT`]), the most agreeing: the first of them verified nearly always
/// raise the bar above every row left out, and where they do not a second sweep takes those
/// the bar still allows.
const STORE_KEPT_PER_ROW: usize = 64;
const STORE_MIN_KEPT: usize = 1024;

/// The least similarity at which a `k` lookup's sweep promises its recall (a row at or above
/// its bar found with probability 0.999). Where the k-th most similar row is less similar, the
/// lookup verifies only the rows whose sketches agree as a row of this similarity would: of
/// real texts, most rows are 0.02-0.1 similar to any other, and to tell them from a row at 0.1
/// the sketch would have to let nearly all of them through (docs/reference.md states what a
/// row below it is found with).
pub(super) const K_GUARANTEED_FROM: f64 = 0.2;

/// Sweeps the sketch store `store` (`sketch_store::SketchStore`): every row whose fine sketch
/// agrees with `doc`'s in enough slots to be at the bar of `ranked` except with probability
/// [`FINE_MISS_PROBABILITY`] (`core::fine`), most agreeing first, each verified unless in
/// `verified` (found by the band keys, or the text's own row) or outside `among`; once the
/// rows left agree in fewer slots than the bar now needs, it stops. Returns what it did.
fn sweep_store(
    cfg: &Index,
    store: &SketchStore,
    doc: &str,
    (verified, among): (&HashSet<Id>, Option<&HashSet<Id>>),
    ranked: &mut Ranked<Id>,
) -> ScanTrace {
    // (a `k` lookup verifies every row that may be at its bar down to K_GUARANTEED_FROM; below
    // it, the rows that agree as a row at K_GUARANTEED_FROM would)
    let k_floor = if ranked.bar_may_rise() {
        K_GUARANTEED_FROM
    } else {
        0.0
    };
    let needed = |bar: f64| min_equal_slots(bar.max(k_floor), FINE_MISS_PROBABILITY);
    let from_bar = ranked.bar();
    let mut trace = ScanTrace {
        from_bar,
        direct: true,
        store: store.indexes(),
        min_slots: needed(from_bar),
        ..ScanTrace::default()
    };
    let Some(probe) = text_sketch(doc, cfg.def.settings.shingling) else {
        trace.to_bar = from_bar;
        return trace;
    };
    let mut exact = JaccardProbe::new(doc, cfg.def.settings.shingling, &mut interrupts);
    let mut seen: HashSet<Id> = HashSet::new();
    let cap = ranked
        .bar_may_rise()
        .then(|| (ranked.k().unwrap_or(1) * STORE_KEPT_PER_ROW).max(STORE_MIN_KEPT));
    let mut list = Shortlist::new(trace.min_slots, cap);
    loop {
        trace.rows_read += store.sweep(&probe, &mut list);
        trace.sweeps += 1;
        let floor = list.floor();
        let rows = std::mem::replace(&mut list, Shortlist::new(0, None)).into_sorted();
        let mut at = 0;
        while at < rows.len() && u32::from(rows[at].0) >= needed(ranked.bar()) {
            // with `k`, one count at a time: the bar can only rise between them; at a fixed
            // bar, every row at it in one pass in TID order (rows of one heap page together)
            let count = rows[at].0;
            let end = if ranked.bar_may_rise() {
                at + rows[at..].partition_point(|r| r.0 == count)
            } else {
                let bar = needed(ranked.bar());
                at + rows[at..].partition_point(|r| u32::from(r.0) >= bar)
            };
            let mut batch: Vec<StoreRow> = rows[at..end].iter().map(|r| r.1).collect();
            batch.sort_unstable();
            store.fetch(
                &cfg.def.text,
                (&cfg.def.id_column, cfg.def.key),
                &batch,
                |id, text| {
                    if verified.contains(id)
                        || among.is_some_and(|among| !among.contains(id))
                        || !seen.insert(id.clone())
                    {
                        return;
                    }
                    trace.verified += 1;
                    let similarity = exact.jaccard(text, &mut interrupts);
                    if similarity >= ranked.bar() {
                        ranked.offer(id.clone(), similarity);
                    }
                },
            );
            at = end;
        }
        // rows agreeing in fewer than `floor` slots were left out: sweep again if the bar
        // reached allows some of them
        let now = needed(ranked.bar());
        if now >= floor {
            break;
        }
        list = Shortlist::new(now, None).below(floor);
    }
    trace.to_bar = ranked.bar();
    trace
}

/// Reads the band sketch of every row of the band table, fewest bits differing from `sketch`
/// first, and verifies each row not in `verified` that may still reach the bar of `ranked`
/// (`core::nearest::max_differing_bits`): once a row differs in more bits, every later one
/// does too, and the scan stops. The band table is read directly where its B-trees may be
/// (`btree::BandHeap`), else through a cursor of its SQL query as the owner. With `shown`
/// (where row-level security hides rows from the caller), only the rows it holds are taken,
/// and the band table is read to its end whatever the bar: a hidden row costs its read alone,
/// whatever its sketch. Returns what it did, and the index the texts were read through (as
/// [`verify`]).
fn scan(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    sketch: [u64; 2],
    (verified, among, tenant): (&HashSet<Id>, Option<&HashSet<Id>>, Option<&Id>),
    shown: Option<&HashSet<Id>>,
    ranked: &mut Ranked<Id>,
) -> (ScanTrace, Option<pg_sys::Oid>) {
    let k = cfg.def.settings.k;
    let from_bar = ranked.bar();
    let mut trace = ScanTrace {
        from_bar,
        max_differing: max_differing_bits(k, from_bar),
        ..ScanTrace::default()
    };
    let mut row_index = None;
    let mut sweep = Sweep {
        k,
        skip: verified,
        among,
        shown,
        seen: HashSet::new(),
        count: None,
        pending: Vec::new(),
    };
    let mut verify_ids = |mut ids: Vec<Id>, ranked: &mut Ranked<Id>| {
        // (in order, the texts' index entries and rows are read from fewer pages)
        ids.sort_unstable();
        row_index = verify(cfg, client, doc, (&ids, tenant), ranked);
    };
    let heap = cfg
        .placement
        .band_index()
        .filter(|index| index.usable())
        .and_then(BandIndex::heap);
    trace.direct = heap.is_some();
    match heap {
        Some(heap) => {
            let rows = heap.nearest(
                |row_sketch| k.min(BAND_SKETCH_BITS) - equal_bits(sketch, row_sketch, k),
                trace.max_differing,
                shown,
            );
            let (mut from, mut size) = (0, SCAN_FIRST_BATCH as usize);
            while from < rows.len() {
                // (rows beyond the bar are not even fetched; the count being verified is
                // finished whatever the bar)
                let reach = max_differing_bits(k, ranked.bar()).max(sweep.count.unwrap_or(0));
                let end = (from + size).min(rows.len());
                let cut = rows[from..end].partition_point(|row| row.differing() <= reach);
                let batch = heap.ids(&rows[from..from + cut]);
                if sweep.take(batch, ranked, &mut trace, &mut verify_ids) || cut < end - from {
                    break;
                }
                from = end;
                size = (size * 2).min(SCAN_LAST_BATCH as usize);
            }
        }
        None => scan_through_sql(
            cfg,
            client,
            (sketch, tenant, shown.is_some()),
            &mut trace,
            |batch, trace| sweep.take(batch, ranked, trace, &mut verify_ids),
        ),
    }
    trace.to_bar = ranked.bar();
    (trace, row_index)
}

/// The rows a [`scan`] verifies, taken in the order the band table gives them: fewest
/// differing bits first. The scan stops only where the count changes, at a count the bar no
/// longer allows, so which rows it verifies (and returns) does not depend on their order
/// within one count: the direct read gives them in physical order, SQL by id.
struct Sweep<'a> {
    k: usize,
    /// Rows verified before the scan (found by the band keys), and the text's own row.
    skip: &'a HashSet<Id>,
    /// The only rows that may be verified, if given.
    among: Option<&'a HashSet<Id>>,
    /// The only rows the caller may see, where row-level security hides others: the rest are
    /// passed over as if absent.
    shown: Option<&'a HashSet<Id>>,
    /// Rows taken (of format 1 through SQL, a row's sketch comes once per band).
    seen: HashSet<Id>,
    /// The differing bits of the rows taken last.
    count: Option<usize>,
    /// Rows taken, not verified yet.
    pending: Vec<Id>,
}

impl Sweep<'_> {
    /// Takes `rows` (id, differing bits), in order, verifying them with `verify` (which
    /// offers them to `ranked`); returns whether the scan is done.
    fn take(
        &mut self,
        rows: Vec<(Id, usize)>,
        ranked: &mut Ranked<Id>,
        trace: &mut ScanTrace,
        verify: &mut impl FnMut(Vec<Id>, &mut Ranked<Id>),
    ) -> bool {
        for (id, differing) in rows {
            if self.shown.is_some_and(|shown| !shown.contains(&id)) {
                continue;
            }
            if self.count != Some(differing) {
                // (a threshold lookup's bar stays where it is: its rows are verified in
                // batches)
                if ranked.bar_may_rise() {
                    self.flush(ranked, trace, verify);
                }
                if differing > max_differing_bits(self.k, ranked.bar()) {
                    self.flush(ranked, trace, verify);
                    return true;
                }
                self.count = Some(differing);
            }
            trace.rows_read += 1;
            if !self.skip.contains(&id)
                && self.among.is_none_or(|among| among.contains(&id))
                && self.seen.insert(id.clone())
            {
                self.pending.push(id);
            }
        }
        self.flush(ranked, trace, verify);
        false
    }

    fn flush(
        &mut self,
        ranked: &mut Ranked<Id>,
        trace: &mut ScanTrace,
        verify: &mut impl FnMut(Vec<Id>, &mut Ranked<Id>),
    ) {
        if !self.pending.is_empty() {
            trace.verified += self.pending.len();
            verify(std::mem::take(&mut self.pending), ranked);
        }
    }
}

/// [`scan`]'s read through a cursor of the band table's SQL query (`Index::scan_sql`), as the
/// table's owner: hands `take` the rows `(id, differing bits)` in batches, fewest differing
/// first (then by id), until it says it is done or they run out; with `whole`, every row, to
/// the end (rows are hidden from the caller: see [`scan`]).
fn scan_through_sql(
    cfg: &Index,
    client: &SpiClient<'_>,
    (sketch, tenant, whole): ([u64; 2], Option<&Id>, bool),
    trace: &mut ScanTrace,
    mut take: impl FnMut(Vec<(Id, usize)>, &mut ScanTrace) -> bool,
) {
    let slots = cfg.def.settings.k.min(BAND_SKETCH_BITS);
    let mask = |word: usize| match slots.saturating_sub(word * 64).min(64) {
        64 => -1i64,
        used => ((1u64 << used) - 1) as i64,
    };
    let int8 = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
    let reach = if whole { slots } else { trace.max_differing };
    let mut args = vec![
        (sketch[0] as i64).into(),
        (sketch[1] as i64).into(),
        mask(0).into(),
        mask(1).into(),
        (reach as i64).into(),
    ];
    let mut types = vec![int8; 5];
    // (within a tenant, the band rows of its shard only)
    let tenant = tenant_arg(cfg, tenant);
    let sql = match (tenant, &cfg.tenant_sql) {
        (Some((arg, arg_type)), Some([_, _, scan_sql, ..])) => {
            args.push(arg);
            types.push(arg_type);
            scan_sql
        }
        _ => &cfg.scan_sql,
    };
    let owner = relation_owner(cfg.def.tbl);
    with_cursor(client, sql, &types, &args, owner, |mut cursor| {
        let (mut done, mut size) = (false, SCAN_FIRST_BATCH);
        while !done {
            pg_sys::check_for_interrupts!();
            let mut batch = Vec::new();
            let fetched = as_owner(owner, || {
                let table = cursor.fetch(size)?;
                let rows = table.len();
                for_each_spi_row(table, |row| {
                    if let (Some(id), Some(differing)) =
                        (cfg.def.key.spi_id(row, 1)?, row.get::<i64>(2)?)
                    {
                        batch.push((id, differing as usize));
                    }
                    Ok(())
                })?;
                // SAFETY: the rows just read were copied into `batch`; nothing refers to
                // the result any more (SPI would otherwise keep every batch until the end).
                unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
                Ok::<_, pgrx::spi::Error>(rows)
            })
            .unwrap_or_else(|e| spi_failed(e));
            // (`take` passes over the rows beyond the bar once it is done)
            done = (take(batch, trace) && !whole) || fetched < size as usize;
            size = (size * 2).min(SCAN_LAST_BATCH);
        }
    });
}

/// Verifies the candidates `ids` of a lookup of `doc`, offering each to `ranked` with its exact
/// similarity if it reaches the bar: on the workers of a Citus table, or here, reading their
/// texts through the table's unique index (returned) or its SQL query.
fn verify(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    (ids, tenant): (&[Id], Option<&Id>),
    ranked: &mut Ranked<Id>,
) -> Option<pg_sys::Oid> {
    let tenant = tenant_arg(cfg, tenant);
    let rows_sql = match (&tenant, &cfg.tenant_sql) {
        (Some(_), Some([_, rows_sql, ..])) => rows_sql,
        _ => &cfg.sql[1],
    };
    if cfg.placement.verifies_remotely() {
        // (verified where the rows are: only ids and similarities come back)
        let (arg, arg_type) = cfg.def.key.array_arg(ids);
        let mut types = vec![arg_type, PgOid::BuiltIn(PgBuiltInOids::TEXTOID)];
        let mut args = vec![arg, doc.into()];
        if let Some((arg, arg_type)) = tenant {
            types.push(arg_type);
            args.push(arg);
        }
        with_prepared_args(client, rows_sql, &types, &args, |table| {
            for_each_spi_row(table, |row| {
                let (id, similarity) = (cfg.def.key.spi_id(row, 1)?, row.get::<f64>(2)?);
                if let (Some(id), Some(s)) = (id, similarity) {
                    ranked.offer(id, s);
                }
                Ok(())
            })
        });
        return None;
    }
    let mut exact = JaccardProbe::new(doc, cfg.def.settings.shingling, &mut interrupts);
    let mut verify = |id: &Id, text: &str| {
        let similarity = exact.jaccard(text, &mut interrupts);
        if similarity >= ranked.bar() {
            ranked.offer(id.clone(), similarity);
        }
    };
    match cfg.placement.row_index().filter(RowIndex::readable) {
        Some(index) => {
            cfg.def.text.evaluating(relation_owner(cfg.def.tbl), || {
                index.fetch(&cfg.def.text, ids, verify)
            });
            Some(index.oid())
        }
        None => {
            let (arg, arg_type) = cfg.def.key.array_arg(ids);
            with_prepared(client, rows_sql, arg_type, arg, |table| {
                for_each_text_row(table, |id, text| {
                    // SAFETY: the query selects the id as the band table stores it.
                    verify(&unsafe { cfg.def.key.id(id, pg_sys::INT8OID) }, text)
                })
            });
            None
        }
    }
}
