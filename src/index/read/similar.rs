//! "What is similar to this text?": `minhash_similar`. It runs once per query, so everything
//! here is in Rust and reuses per-backend state: the catalog row is cached, the candidates and
//! their texts are read straight through the indexes (`btree`), or, where that would not see
//! what SQL sees, through statements prepared once per backend; no PL/pgSQL or SQL function
//! runs in between.

use std::collections::HashSet;
use std::rc::Rc;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{AnyElement, PgBuiltInOids, PgOid, PgSqlErrorCode};

use crate::core::capacity;
use crate::core::fine::FINE_SLOTS;
use crate::core::params::{candidate_probability, float8_text};
use crate::core::sketch::BAND_SKETCH_BITS;
use crate::pg::backend::with_new_statement_snapshot;
use crate::pg::error::raise;
use crate::pg::names::type_name;
use crate::pg::names::{
    equality_operator, qualified, qualified_name, qualified_type_name, quote_ident_str,
    quote_literal, regclass_name, Regclass,
};

use super::access_plan::Index;
use super::btree::RowIndex;
use super::lookup::{self, Trace, Want};
use crate::index::def::citus::nested_execution;
use crate::index::def::row_id::Id;
use crate::index::def::settings::{checked_threshold, notice_low_threshold};
use crate::index::run::prepared::with_prepared;
use crate::index::run::spi::for_each_spi_row;

/// The checked arguments of a lookup function: the table and its index, the threshold (NULL:
/// the index's, or with `k` any similarity), the most similar rows to return per text (`k`:
/// the k most similar, found by a scan where the band keys do not suffice; NULL: all at or
/// above the threshold), the most rows to return (NULL: all) and the only rows that may be
/// returned (`among`; NULL: any), and of a Citus table distributed by a tenant, the tenant
/// whose rows alone are looked up (`tenant`; NULL: every tenant's); whether the statement's
/// snapshot predates the index (`new_snapshot`: see `IndexDef::snapshot_predates`), so that
/// the lookups read under a new one.
struct Lookup {
    fn_oid: pg_sys::Oid,
    tbl: pg_sys::Oid,
    threshold: Option<f64>,
    k: Option<usize>,
    max_results: Option<i32>,
    among: Option<HashSet<Id>>,
    tenant: Option<Id>,
    new_snapshot: bool,
}

impl Lookup {
    fn new(
        tbl: Option<Regclass>,
        threshold: Option<f64>,
        k: Option<i32>,
        max_results: Option<i32>,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> Lookup {
        let Some(Regclass(tbl)) = tbl else {
            raise(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "tbl must not be NULL",
                None,
            );
        };
        for (name, value) in [("max_results", max_results), ("k", k)] {
            if let Some(value) = value.filter(|&m| m < 1) {
                raise(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("{name} must be at least 1, got {value}"),
                    None,
                );
            }
        }
        // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo names the function.
        let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
        Lookup {
            fn_oid,
            tbl,
            threshold,
            k: k.map(|k| k as usize),
            max_results,
            among: None,
            tenant: None,
            new_snapshot: false,
        }
    }

    /// Runs `f`, which reads the table or its band table, under the snapshot the lookup reads
    /// under: the statement's, or where that predates the index, a new one.
    fn reading<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.new_snapshot {
            with_new_statement_snapshot(f)
        } else {
            f()
        }
    }

    /// Restricts the lookup to the rows of tenant `tenant` (text, read by the input function
    /// of the type of the column the table is distributed by, as a cast would): 22023 for an
    /// index of a table that is not distributed by a tenant.
    fn within_tenant(&mut self, cfg: &Index, tenant: Option<&str>) {
        let Some(tenant) = tenant else {
            return;
        };
        let column = cfg
            .def
            .tenant_column("; filter other tables' rows with among");
        self.tenant = Some(column.key.parse(tenant));
    }

    /// Restricts the lookup to the rows whose ids `ids` holds (NULL elements hold none).
    fn among_ids(&mut self, count: usize, ids: impl Iterator<Item = Option<Id>>) {
        let mut among = HashSet::new();
        capacity::reserve_set(&mut among, count, "the ids of among").unwrap_or_else(|e| e.fail());
        for id in ids.flatten() {
            pg_sys::check_for_interrupts!();
            among.insert(id);
        }
        self.among = Some(among);
    }

    /// Restricts the lookup to the rows of the table whose ids equal an element of `ids` (ids
    /// as text, read by the id type's input function) by the equality of the id type's default
    /// B-tree operator class (`citext`'s for citext), as the caller sees the rows: the ids as
    /// the index stores them. Of a Citus table, the query runs as a lookup's do
    /// (`citus::nested_execution`: the call may run inside a query of a shard).
    fn among_rows(&mut self, client: &SpiClient<'_>, cfg: &Index, ids: Array<'_, &str>) {
        let def = &cfg.def;
        let sql = format!(
            "SELECT t.{id}{cast} FROM {tbl} t WHERE t.{id} {eq} ANY ($1::{id_type}[])",
            id = quote_ident_str(&def.id_column),
            cast = if def.key.integer {
                "::pg_catalog.int8"
            } else {
                ""
            },
            tbl = qualified_name(def.tbl),
            eq = equality_operator(def.id_type),
            id_type = qualified_type_name(PgOid::from(def.id_type)),
        );
        let mut texts: Vec<Option<&str>> = Vec::new();
        capacity::reserve(&mut texts, ids.len(), "the ids of among").unwrap_or_else(|e| e.fail());
        texts.extend(ids.iter());
        let text_array = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);
        let mut found = Vec::new();
        let resolve = || {
            with_prepared(client, &sql, text_array, texts.into(), |table| {
                for_each_spi_row(table, |row| {
                    capacity::push(&mut found, def.key.spi_id(row, 1)?, "the ids of among")
                        .unwrap_or_else(|e| e.fail());
                    Ok(())
                })
            })
        };
        self.reading(|| {
            if cfg.placement.verifies_remotely() {
                nested_execution(resolve);
            } else {
                resolve();
            }
        });
        self.among_ids(found.len(), found.into_iter());
    }

    /// The index's settings, after checking that the caller may read what a lookup reads;
    /// a NOTICE if the threshold is below what a lookup finds with full recall (see
    /// `notice_low_threshold`).
    fn config(&mut self, client: &SpiClient<'_>) -> Rc<Index> {
        let cfg = Index::get(client, self.fn_oid, self.tbl);
        self.new_snapshot = cfg.def.snapshot_predates();
        cfg.def.check_readable();
        let want = self.want(&cfg);
        if !want.scan {
            notice_low_threshold(want.floor, cfg.def.threshold, cfg.def.settings.banding);
        }
        cfg
    }

    /// What a lookup in `cfg` returns (see `lookup::Want`).
    fn want(&self, cfg: &Index) -> Want {
        let floor = match (self.threshold, self.k) {
            (None, Some(_)) => 0.0,
            (threshold, _) => checked_threshold(threshold, cfg.def.threshold),
        };
        let store = cfg.placement.store().is_some_and(|s| s.readable());
        Want::complete(floor, self.k, store)
    }

    /// The rows similar to `doc` (see `lookup::traced`), at most `max_results`. The
    /// statement's locks keep `cfg` current.
    fn similar(&self, client: &SpiClient<'_>, cfg: &Index, doc: Option<&str>) -> Vec<(Id, f64)> {
        pg_sys::check_for_interrupts!();
        let Some(doc) = doc else {
            return Vec::new();
        };
        let mut found = self.reading(|| {
            lookup::traced(
                cfg,
                client,
                doc,
                self.want(cfg),
                (None, self.among.as_ref(), self.tenant.as_ref()),
                &mut Trace::default(),
            )
        });
        if let Some(max) = self.max_results {
            found.truncate(max as usize);
        }
        found
    }
}

/// The index's ids as `bigint`: 42804 for a key that is not an integer, with a hint at the
/// form that returns ids in their own type.
fn integer_ids(cfg: &Index, function: &str, call: &str) {
    if !cfg.def.key.integer {
        raise(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!(
                "the id column \"{}\" of {} is of type {}, not an integer",
                cfg.def.id_column,
                regclass_name(cfg.def.tbl),
                type_name(cfg.def.id_type)
            ),
            Some(format!(
                "Pass the id type to get ids of that type: {function}({}, {call}id_type => NULL::{}).",
                quote_literal(&regclass_name(cfg.def.tbl)),
                type_name(cfg.def.id_type)
            )),
        );
    }
}

/// The type of the `id_type` argument (number `argno`, from 0), which must be the type of the
/// index's id column (42804).
fn id_type_argument(cfg: &Index, fcinfo: pg_sys::FunctionCallInfo, argno: i32) -> pg_sys::Oid {
    // SAFETY: this call's fcinfo; the argument is declared anyelement, so its type is known.
    let given = unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, argno) };
    if given != cfg.def.id_type {
        raise(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!(
                "id_type is {}, but the id column \"{}\" of {} is of type {}",
                type_name(given),
                cfg.def.id_column,
                regclass_name(cfg.def.tbl),
                type_name(cfg.def.id_type)
            ),
            Some(format!(
                "Pass id_type => NULL::{}.",
                type_name(cfg.def.id_type)
            )),
        );
    }
    given
}

/// `id` as a value of the id column's type `id_type`, for a result row.
fn typed_id(cfg: &Index, id: &Id, id_type: pg_sys::Oid) -> AnyElement {
    let datum = cfg.def.key.convert(id, id_type, -1);
    // SAFETY: `datum` is a non-NULL value of type `id_type`.
    unsafe { AnyElement::from_polymorphic_datum(datum, false, id_type) }.expect("not NULL")
}

fn integer(id: Id) -> i64 {
    match id {
        Id::Int(v) => v,
        Id::Bytes(_) => unreachable!("integer keys are stored as bigint"),
    }
}

/// The rows of `tbl` whose text is at least `threshold` similar to `doc` (default: the index's
/// threshold), most similar first, at most `max_results` of them (default: all), among the
/// rows whose ids `among` holds (default: all rows); ids as `bigint` (integer keys).
#[pg_extern(stable, parallel_safe)]
#[allow(clippy::too_many_arguments)] // (the SQL function's arguments)
fn minhash_similar(
    tbl: Option<Regclass>,
    doc: Option<&str>,
    threshold: default!(Option<f64>, "NULL"),
    max_results: default!(Option<i32>, "NULL"),
    k: default!(Option<i32>, "NULL"),
    among: default!(Option<Array<'_, i64>>, "NULL"),
    tenant: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, i64), name!(similarity, f64))> {
    let mut lookup = Lookup::new(tbl, threshold, k, max_results, fcinfo);
    if let Some(among) = among {
        lookup.among_ids(among.len(), among.iter().map(|id| id.map(Id::Int)));
    }
    let found = Spi::connect(|client| {
        let cfg = lookup.config(client);
        integer_ids(&cfg, "minhash_similar", "doc, ");
        lookup.within_tenant(&cfg, tenant);
        lookup.similar(client, &cfg, doc)
    });
    TableIterator::new(found.into_iter().map(|(id, s)| (integer(id), s)))
}

/// [`minhash_similar`] with ids in the id column's own type, which `id_type` names
/// (`NULL::uuid`).
#[pg_extern(stable, parallel_safe, name = "minhash_similar")]
#[allow(clippy::too_many_arguments)] // (the SQL function's arguments)
fn minhash_similar_typed(
    tbl: Option<Regclass>,
    doc: Option<&str>,
    id_type: Option<AnyElement>,
    threshold: default!(Option<f64>, "NULL"),
    max_results: default!(Option<i32>, "NULL"),
    k: default!(Option<i32>, "NULL"),
    among: default!(Option<Array<'_, &str>>, "NULL"),
    tenant: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, AnyElement), name!(similarity, f64))> {
    let _ = id_type;
    let mut lookup = Lookup::new(tbl, threshold, k, max_results, fcinfo);
    let (cfg, found) = Spi::connect(|client| {
        let cfg = lookup.config(client);
        id_type_argument(&cfg, fcinfo, 2);
        lookup.within_tenant(&cfg, tenant);
        if let Some(among) = among {
            lookup.among_rows(client, &cfg, among);
        }
        let found = lookup.similar(client, &cfg, doc);
        (cfg, found)
    });
    let id_type = cfg.def.id_type;
    // (the ids are made here, in the memory of the whole call, not in SPI's)
    TableIterator::new(
        found
            .into_iter()
            .map(move |(id, s)| (typed_id(&cfg, &id, id_type), s)),
    )
}

/// For each text of `docs`, the rows of `tbl` at least `threshold` similar to it, most similar
/// first, at most `max_results` per text: `(probe, id, similarity)` with `probe` the text's
/// position in `docs` (from 1). The lookups run one text at a time as the rows are read (of a
/// Citus table, 256 texts at a time: see [`matches`]).
#[pg_extern(stable, parallel_safe)]
fn minhash_matches(
    tbl: Option<Regclass>,
    docs: Option<Array<'_, &str>>,
    threshold: default!(Option<f64>, "NULL"),
    max_results: default!(Option<i32>, "NULL"),
    k: default!(Option<i32>, "NULL"),
    tenant: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(probe, i32), name!(id, i64), name!(similarity, f64))> {
    let mut lookup = Lookup::new(tbl, threshold, k, max_results, fcinfo);
    let cfg = Spi::connect(|client| lookup.config(client));
    integer_ids(&cfg, "minhash_matches", "docs, ");
    lookup.within_tenant(&cfg, tenant);
    let docs = owned_texts(docs);
    TableIterator::new(matches(lookup, cfg, docs).map(|(probe, id, s)| (probe, integer(id), s)))
}

/// [`minhash_matches`] with ids in the id column's own type, which `id_type` names.
#[pg_extern(stable, parallel_safe, name = "minhash_matches")]
#[allow(clippy::too_many_arguments)] // (the SQL function's arguments)
fn minhash_matches_typed(
    tbl: Option<Regclass>,
    docs: Option<Array<'_, &str>>,
    id_type: Option<AnyElement>,
    threshold: default!(Option<f64>, "NULL"),
    max_results: default!(Option<i32>, "NULL"),
    k: default!(Option<i32>, "NULL"),
    tenant: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(probe, i32),
        name!(id, AnyElement),
        name!(similarity, f64),
    ),
> {
    let _ = id_type;
    let mut lookup = Lookup::new(tbl, threshold, k, max_results, fcinfo);
    let cfg = Spi::connect(|client| lookup.config(client));
    let id_type = id_type_argument(&cfg, fcinfo, 2);
    lookup.within_tenant(&cfg, tenant);
    let docs = owned_texts(docs);
    let key = Rc::clone(&cfg);
    TableIterator::new(
        matches(lookup, cfg, docs)
            .map(move |(probe, id, s)| (probe, typed_id(&key, &id, id_type), s)),
    )
}

/// The texts of a `text[]` argument, copied (NULL elements stay NULL); 54000 beyond what an
/// array can hold anyway.
fn owned_texts(docs: Option<Array<'_, &str>>) -> Vec<Option<String>> {
    let Some(docs) = docs else {
        return Vec::new();
    };
    let mut owned = Vec::new();
    crate::core::capacity::reserve(&mut owned, docs.len(), "probe texts")
        .unwrap_or_else(|e| e.fail());
    owned.extend(docs.iter().map(|doc| doc.map(str::to_owned)));
    owned
}

/// The matches of each text of `docs` in turn, looked up as they are read: of a Citus
/// table, [`lookup::BATCH_TEXTS`] texts at a time where `lookup::batch` can (within a
/// tenant, text by text: each lookup reads the one shard of the tenant).
fn matches(
    lookup: Lookup,
    cfg: Rc<Index>,
    docs: Vec<Option<String>>,
) -> Box<dyn Iterator<Item = (i32, Id, f64)>> {
    if cfg.batch_sql.is_none() || lookup.tenant.is_some() {
        return Box::new(docs.into_iter().zip(1..).flat_map(move |(doc, probe)| {
            Spi::connect(|client| lookup.similar(client, &cfg, doc.as_deref()))
                .into_iter()
                .map(move |(id, s)| (probe, id, s))
        }));
    }
    let mut docs = docs.into_iter();
    let mut next_probe = 1;
    let chunks = std::iter::from_fn(move || {
        let chunk: Vec<Option<String>> = docs.by_ref().take(lookup::BATCH_TEXTS).collect();
        if chunk.is_empty() {
            return None;
        }
        let first = next_probe;
        next_probe += chunk.len() as i32;
        let found = Spi::connect(|client| {
            pg_sys::check_for_interrupts!();
            let want = lookup.want(&cfg);
            let batch = lookup.reading(|| lookup::batch(&cfg, client, &chunk, want));
            batch.unwrap_or_else(|| {
                let similar = |doc: &Option<String>| lookup.similar(client, &cfg, doc.as_deref());
                chunk.iter().map(similar).collect()
            })
        });
        let max = lookup.max_results.map_or(usize::MAX, |max| max as usize);
        Some(
            found
                .into_iter()
                .zip(first..)
                .flat_map(move |(rows, probe)| {
                    rows.into_iter()
                        .take(max)
                        .map(move |(id, s)| (probe, id, s))
                }),
        )
    });
    Box::new(chunks.flatten())
}

/// The two queries `minhash_similar` and `minhash_flag_duplicate` prepare for `tbl` (see
/// `Index::lookup_sql`), named `bands` and `rows`; shown so their plans can be checked.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_lookup_sql(
    tbl: Regclass,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(step, String), name!(query, String))> {
    // SAFETY: as in minhash_similar.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let [bands, rows] = Spi::connect(|client| Index::get(client, fn_oid, tbl.0).sql.clone());
    TableIterator::new([("bands".to_owned(), bands), ("rows".to_owned(), rows)])
}

/// The indexes a lookup of `tbl` by the current user would read directly now (see `btree`), by
/// name: the band index for candidates and the table's unique index for their texts; NULL for a
/// step that would run its SQL query instead. Shown so tests can tell.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_direct_reads(
    tbl: Regclass,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(band_index, Option<String>),
        name!(row_index, Option<String>),
    ),
> {
    // SAFETY: as in minhash_similar.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let cfg = Spi::connect(|client| Index::get(client, fn_oid, tbl.0));
    let band = cfg.placement.band_index().filter(|index| index.usable());
    let rows = cfg.placement.row_index().filter(RowIndex::readable);
    TableIterator::once((
        band.and_then(|index| qualified(index.oid())),
        rows.and_then(|index| qualified(index.oid())),
    ))
}

/// What a lookup of `doc` in `tbl` does (as [`minhash_similar`] with `threshold` and `k`),
/// one line per step, as EXPLAIN ANALYZE shows a query: the band keys probed and how the band
/// rows were read, the band rows sharing a key, those that passed the sketch filter and the
/// distinct candidates verified, how their texts were read, the scan of every row's sketch
/// where the band keys did not suffice, the rows found, and the time of each step.
#[pg_extern(volatile, parallel_safe)]
fn minhash_explain(
    tbl: Option<Regclass>,
    doc: Option<&str>,
    threshold: default!(Option<f64>, "NULL"),
    k: default!(Option<i32>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> SetOfIterator<'static, String> {
    let mut lookup = Lookup::new(tbl, threshold, k, None, fcinfo);
    let lines = Spi::connect(|client| {
        let cfg = lookup.config(client);
        let want = lookup.want(&cfg);
        let mut trace = Trace::default();
        if let Some(doc) = doc {
            lookup.reading(|| {
                lookup::traced(&cfg, client, doc, want, (None, None, None), &mut trace)
            });
        }
        explained(&cfg, want, &trace)
    });
    SetOfIterator::new(lines)
}

/// The lines of [`minhash_explain`].
fn explained(cfg: &Index, want: Want, trace: &Trace) -> Vec<String> {
    let read = |index: Option<pg_sys::Oid>| match index.and_then(qualified) {
        Some(name) => format!("by index {name}"),
        None => "by SQL".to_owned(),
    };
    let ms = |d: std::time::Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    let def = &cfg.def;
    let asked = match want.k {
        Some(k) => format!(
            "the {k} most similar at or above {}",
            float8_text(want.floor)
        ),
        None => format!("threshold {}", float8_text(want.floor)),
    };
    let mut lines = vec![format!(
        "Lookup in {} through band table {} ({asked}; k {}, {} bands of {} rows)",
        regclass_name(def.tbl),
        regclass_name(def.band_table),
        def.settings.k,
        def.settings.banding.bands,
        def.settings.banding.rows
    )];
    if trace.keys == 0 {
        // (see `core::signature::EMPTY_SLOT`)
        lines.push("  No band keys: a NULL text, or one without shingles, matches no row".into());
        return lines;
    }
    let more = match trace.band_indexes {
        n if n > 1 && trace.band_index.is_some() => format!(" and {} more, one per band", n - 1),
        _ => String::new(),
    };
    lines.push(format!(
        "  Band keys probed: {}, {}{more}",
        trace.keys,
        read(trace.band_index)
    ));
    // Where row-level security hides rows from the caller, the lookup did nothing with a
    // hidden row but read its band rows under the keys and ask the caller's query for it: the
    // counts are of the rows that query returned (`lookup::traced`).
    if trace.visible_only {
        lines.push(format!(
            "  Row-level security hides rows of {} from the current user: the counts below are \
             of the rows it may see",
            regclass_name(def.tbl)
        ));
    }
    lines.extend([
        format!("  Band rows sharing a key: {}", trace.band_rows),
        format!(
            "  Passed the sketch filter (at least {} of {} bits equal): {} rows, {} distinct \
             candidates",
            trace.min_bits,
            def.settings.k.min(BAND_SKETCH_BITS),
            trace.passed,
            trace.candidates
        ),
    ]);
    if trace.remote {
        lines.push(format!(
            "  Candidates verified on the Citus workers: {}",
            trace.candidates
        ));
    } else {
        lines.push(format!(
            "  Candidates verified: {}, texts read {}",
            trace.candidates,
            read(trace.row_index)
        ));
    }
    if let Some(scan) = trace.scan.as_ref().filter(|scan| !scan.store.is_empty()) {
        let rose = if scan.to_bar > scan.from_bar {
            format!(", then {} as rows were found", float8_text(scan.to_bar))
        } else {
            String::new()
        };
        let names: Vec<String> = scan.store.iter().filter_map(|&i| qualified(i)).collect();
        lines.push(format!(
            "  The band keys find a row of similarity {} with probability {:.3}: swept the \
             sketch store ({}) for rows with at least {} of {FINE_SLOTS} sketch slots equal, \
             most first (the bar: {}{rose}): {} entries read in {} sweep{}, {} rows verified",
            float8_text(scan.from_bar),
            candidate_probability(
                scan.from_bar,
                def.settings.banding.bands,
                def.settings.banding.rows
            ),
            names.join(", "),
            scan.min_slots,
            float8_text(scan.from_bar),
            scan.rows_read,
            scan.sweeps,
            if scan.sweeps == 1 { "" } else { "s" },
            scan.verified,
        ));
    } else if let Some(scan) = &trace.scan {
        let counts = format!(
            ": {} band rows read, {} rows verified",
            scan.rows_read, scan.verified
        );
        let rose = if scan.to_bar > scan.from_bar {
            format!(", then {} as rows were found", float8_text(scan.to_bar))
        } else {
            String::new()
        };
        lines.push(format!(
            "  The band keys find a row of similarity {} with probability {:.3}: scanned every \
             row's sketch ({}) for rows within {} differing bits of {}, fewest first (the bar: \
             {}{rose}){counts}",
            float8_text(scan.from_bar),
            candidate_probability(
                scan.from_bar,
                def.settings.banding.bands,
                def.settings.banding.rows
            ),
            if scan.direct {
                "band table read directly"
            } else {
                "band table read by SQL"
            },
            scan.max_differing,
            def.settings.k.min(BAND_SKETCH_BITS),
            float8_text(scan.from_bar),
        ));
    }
    lines.push(match want.k {
        Some(k) => format!("  Rows returned (the {k} most similar): {}", trace.found),
        None => format!("  Rows at or above the threshold: {}", trace.found),
    });
    lines.push(format!(
        "  Time: {} finding candidates, {} verifying",
        ms(trace.finding),
        ms(trace.verifying)
    ));
    lines
}
