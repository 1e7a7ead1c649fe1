//! The backfill's bulk write (`_minhash_band_fill`, called by `_minhash_backfill` in
//! src/index/sql/build.sql for a new band table): the rows of a chunk of the table, read through a
//! cursor, signed on the build's threads (`band_values_batch`), and their band rows written
//! into the band table a thousand at a time with the table access method's multi-insert, as
//! `COPY` writes rows (a page of rows to a WAL record), rather than one executor row each.
//! Only into a band table that `BandTable::open` accepts (the plain heap table of the table's
//! owner that `minhash_index_create` made, no trigger but its load trigger, no rules,
//! row-level security or CHECK constraints, its exact columns) and that has no index yet (a
//! multi-insert maintains none): the one `minhash_index_create` fills before it builds the
//! band table's B-trees.

use std::ffi::c_int;

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::index::def::band::{band_values_batch, BandFormat};
use crate::index::def::citus;
use crate::index::def::extension::Extension;
use crate::index::read::access_plan::Index;
use crate::index::read::whole_table::for_each_batch;
use crate::index::run::owner;
use crate::index::run::spi::for_each_spi_row;
use crate::pg::compat;
use crate::pg::error::raise;
use crate::pg::names::{regclass_name, Regclass};

use super::band_table::BandTable;

/// Band rows written by one multi-insert.
const SLOTS: usize = 1_000;

/// Internal to `_minhash_backfill`: writes the band rows of the rows `rows_query` yields into
/// `band`, the band table of an index of `tbl` that has no index yet (55000 otherwise), and
/// returns `{rows read, the last row's id as text}` (NULL for none). The query yields `(id,
/// text, id as text)` rows, the id in the band table's id type, the others `text` (42804
/// otherwise); a row with a NULL id, or whose text is not indexed, gets no band rows. The
/// caller must have the privileges of `tbl`'s owner (42501), who owns `band`.
#[pg_extern(volatile, strict, parallel_unsafe, schema = "minhash_internal")]
fn _minhash_band_fill(
    tbl: Regclass,
    band: Regclass,
    rows_query: &str,
    fcinfo: pg_sys::FunctionCallInfo,
) -> Vec<Option<String>> {
    let (tbl, band) = (tbl.0, band.0);
    let owner = owner::check_owner(tbl);
    // SAFETY: fcinfo is this call's.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let cfgs = Spi::connect(|client| Index::of_table(client, fn_oid, tbl));
    let Some(cfg) = cfgs.iter().find(|c| c.def.band_table == band) else {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!(
                "{} is not the band table of an index of {}",
                regclass_name(band),
                regclass_name(tbl)
            ),
            None,
        )
    };
    if cfg.def.tenant.is_some() || citus::is_citus_table(tbl) {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "the band table of Citus table {} is filled by Citus",
                regclass_name(tbl)
            ),
            None,
        );
    }
    // SAFETY: opened, checked and closed below, within this transaction.
    let table = unsafe { BandTable::open(cfg, band, tbl, owner, Extension::of_function(fn_oid)) };
    let rel = table.rel;
    let settings = cfg.def.settings;
    let bands = settings.banding.bands;
    let columns = cfg.def.format.columns(bands);
    let per_row = cfg.def.format == BandFormat::PerRow;
    // SAFETY: the relation is open; its index list and descriptor are read while it is.
    let (natts, positions) = unsafe {
        if pg_sys::list_length(pg_sys::RelationGetIndexList(rel)) != 0 {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("{} has indexes", regclass_name(band)),
                None,
            );
        }
        let attributes = compat::attributes((*rel).rd_att);
        // (where each of `columns` stands; BandTable::open checked they are all there)
        let positions: Vec<usize> = columns
            .iter()
            .map(|name| {
                attributes
                    .iter()
                    .position(|a| !a.attisdropped && pgrx::name_data_to_str(&a.attname) == name)
                    .expect("a column BandTable::open found")
            })
            .collect();
        (attributes.len(), positions)
    };
    let mut writer = Writer::new(rel, natts);
    let mut read = 0i64;
    let mut last = None;
    for_each_batch(rows_query, |rows| {
        // SAFETY: SPI_tuptable is the batch `rows` holds, just fetched.
        let types: Vec<pg_sys::Oid> =
            unsafe { compat::attributes((*pg_sys::SPI_tuptable).tupdesc) }
                .iter()
                .map(|a| a.atttypid)
                .collect();
        if types != [cfg.def.key.oid, pg_sys::TEXTOID, pg_sys::TEXTOID] {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                "the rows of a band table's fill must be (id in its id type, text, text)"
                    .to_string(),
                None,
            );
        }
        let mut ids = Vec::with_capacity(rows.len());
        let mut docs = Vec::with_capacity(rows.len());
        for_each_spi_row(rows, |row| {
            ids.push(row.get_datum_by_ordinal(1)?);
            docs.push(match row.get_datum_by_ordinal(2)? {
                // SAFETY: column 2 is text (checked above), not NULL here; it and a
                // detoasted copy live in this batch's SPI session.
                Some(text) => unsafe { <&str as FromDatum>::from_datum(text, false) },
                None => None,
            });
            last = row.get::<String>(3)?;
            Ok(())
        })?;
        read += ids.len() as i64;
        let values = band_values_batch(&docs, &settings);
        for (id, values) in ids.into_iter().zip(values) {
            let (Some(id), Some(values)) = (id, values) else {
                continue;
            };
            let (keys, sketch) = values.split_at(bands);
            let sketch = [
                (positions[if per_row { 1 } else { 2 }], sketch[0]),
                (positions[if per_row { 2 } else { 3 }], sketch[1]),
            ];
            if per_row {
                // (id, sketch1, sketch2, key1, ..., key<bands>)
                writer.add(
                    std::iter::once((positions[0], id))
                        .chain(sketch.map(|(at, v)| (at, v.into())))
                        .chain(
                            keys.iter()
                                .zip(&positions[3..])
                                .map(|(&key, &at)| (at, key.into())),
                        ),
                );
            } else {
                // (id, key, sketch1, sketch2), one per key
                for &key in keys {
                    writer.add(
                        [(positions[0], id), (positions[1], key.into())]
                            .into_iter()
                            .chain(sketch.map(|(at, v)| (at, v.into()))),
                    );
                }
            }
        }
        // (the ids point into this batch's SPI session)
        writer.flush();
        Ok(())
    });
    writer.finish();
    table.close();
    vec![Some(read.to_string()), last]
}

/// Band rows gathered in tuple slots, written by multi-inserts of [`SLOTS`] rows.
struct Writer {
    rel: pg_sys::Relation,
    natts: usize,
    slots: Vec<*mut pg_sys::TupleTableSlot>,
    used: usize,
    cid: pg_sys::CommandId,
    bulk: pg_sys::BulkInsertState,
}

impl Writer {
    fn new(rel: pg_sys::Relation, natts: usize) -> Writer {
        // SAFETY: slots of the open relation's descriptor and a bulk-insert state, in the
        // call's memory context, dropped by `finish` (or with the context on an error).
        unsafe {
            Writer {
                rel,
                natts,
                slots: (0..SLOTS)
                    .map(|_| pg_sys::table_slot_create(rel, std::ptr::null_mut()))
                    .collect(),
                used: 0,
                cid: pg_sys::GetCurrentCommandId(true),
                bulk: pg_sys::GetBulkInsertState(),
            }
        }
    }

    /// Adds a band row of `values` (position, datum); the other columns (dropped ones) NULL.
    fn add(&mut self, values: impl Iterator<Item = (usize, pg_sys::Datum)>) {
        if self.used == SLOTS {
            self.flush();
        }
        let slot = self.slots[self.used];
        // SAFETY: the slot has `natts` values; an int8 datum is by value, an id datum points
        // into the batch's SPI session, which outlives the next flush.
        unsafe {
            pg_sys::ExecClearTuple(slot);
            for i in 0..self.natts {
                *(*slot).tts_isnull.add(i) = true;
            }
            for (at, datum) in values {
                *(*slot).tts_values.add(at) = datum;
                *(*slot).tts_isnull.add(at) = false;
            }
            pg_sys::ExecStoreVirtualTuple(slot);
        }
        self.used += 1;
    }

    /// Writes the band rows gathered.
    fn flush(&mut self) {
        if self.used == 0 {
            return;
        }
        pgrx::check_for_interrupts!();
        // SAFETY: `used` slots hold rows of the relation's descriptor.
        unsafe {
            pg_sys::table_multi_insert(
                self.rel,
                self.slots.as_mut_ptr(),
                self.used as c_int,
                self.cid,
                0,
                self.bulk,
            );
            for &slot in &self.slots[..self.used] {
                pg_sys::ExecClearTuple(slot);
            }
        }
        self.used = 0;
    }

    fn finish(mut self) {
        self.flush();
        // SAFETY: made in `new`, no longer used.
        unsafe {
            pg_sys::FreeBulkInsertState(self.bulk);
            pg_sys::table_finish_bulk_insert(self.rel, 0);
            for &slot in &self.slots {
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
        }
    }
}
