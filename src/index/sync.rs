//! The insert half of keeping a band table exact: `_minhash_sync_insert`, the `AFTER INSERT ...
//! FOR EACH STATEMENT` trigger of every indexed table. It reads the statement's new rows from
//! the transition table and writes their band rows straight into the band table's heap (many
//! rows per call) and indexes, as COPY does, instead of through the PL/pgSQL sync function and
//! an `INSERT ... SELECT`: no executor start-up, no PL/pgSQL and no second trip through SQL per
//! statement.
//!
//! The direct write is taken only while it does exactly what the SQL `INSERT` of the sync
//! function would: the band table is still the plain heap table `minhash_index_create` made
//! (the same four int8 columns, no triggers, rules, CHECK constraints, row-level security,
//! generated or identity columns, deferred unique or exclusion constraints), and the table's
//! owner, as whom the sync function runs, may insert into it. Otherwise the trigger hands the
//! call, transition table and all, to the table's PL/pgSQL sync function.

use std::convert::Infallible;
use std::ffi::c_int;

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::{PgMemoryContexts, PgSqlErrorCode};

use crate::sql::error::raise;

use super::band_entry;
use super::lookup::{column, regclass_name, IndexConfig, COLUMNS_HINT};

/// Band rows gathered before they go to the heap in one `heap_multi_insert` (COPY's batch).
const BATCH: usize = 1000;

/// The band table's columns, in order, as `minhash_index_create` makes them.
const BAND_COLUMNS: [&str; 4] = ["id", "key", "sketch1", "sketch2"];

/// Trigger function for `AFTER INSERT ... REFERENCING NEW TABLE AS new_rows FOR EACH
/// STATEMENT` on an indexed table (made by `minhash_index_create`): adds the band rows of the
/// inserted rows to its band table.
#[pg_trigger]
fn _minhash_sync_insert<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    let data = trigger.trigger_data();
    let event = data.tg_event;
    let fits = event & pg_sys::TRIGGER_EVENT_TIMINGMASK == pg_sys::TRIGGER_EVENT_AFTER
        && event & pg_sys::TRIGGER_EVENT_ROW == 0
        && event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_INSERT
        && !data.tg_newtable.is_null();
    if !fits {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "_minhash_sync_insert() must be fired AFTER INSERT FOR EACH STATEMENT with a new \
             transition table",
            None,
        );
    }
    // SAFETY: a statement trigger's relation is open while it fires.
    let (tbl, owner) = unsafe {
        let rel = data.tg_relation;
        ((*rel).rd_id, (*(*rel).rd_rel).relowner)
    };
    let cfg = Spi::connect(|client| IndexConfig::get(client, trigger.trigger().tgfoid, tbl));
    // SAFETY: the band table is locked as an INSERT would lock it; it stays open (and every
    // index `BandWriter` opens) until the writer is finished or the transaction aborts.
    unsafe {
        let band = pg_sys::try_table_open(cfg.band_table, pg_sys::RowExclusiveLock as c_int);
        if band.is_null() {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("the band table of {} does not exist", regclass_name(tbl)),
                Some("Drop the index with minhash_index_drop() and create it again.".into()),
            );
        }
        match BandWriter::open(band, owner) {
            Some(mut writer) => {
                insert_band_rows(data, &cfg, &mut writer);
                writer.close();
            }
            None => {
                pg_sys::table_close(band, pg_sys::NoLock as c_int);
                forward(data, &cfg, tbl);
            }
        }
    }
    Ok(None)
}

/// Adds the band rows of every row of the statement's new transition table.
///
/// # Safety
/// `data` is the trigger data of a statement trigger with a new transition table.
unsafe fn insert_band_rows(data: &pg_sys::TriggerData, cfg: &IndexConfig, writer: &mut BandWriter) {
    // SAFETY: the transition table holds tuples of the trigger's relation, described by its
    // descriptor; each is read while the slot holds it.
    unsafe {
        let tupdesc = (*data.tg_relation).rd_att;
        let tbl = (*data.tg_relation).rd_id;
        let (text_attno, _, _) = column(tupdesc, tbl, &cfg.text_column, COLUMNS_HINT);
        let (id_attno, id_type, _) = column(tupdesc, tbl, &cfg.id_column, COLUMNS_HINT);
        // A read pointer of our own, as each scan of a transition table in SQL takes one.
        let rows = data.tg_newtable;
        let pointer =
            pg_sys::tuplestore_alloc_read_pointer(rows, pg_sys::EXEC_FLAG_REWIND as c_int);
        pg_sys::tuplestore_select_read_pointer(rows, pointer);
        pg_sys::tuplestore_rescan(rows);
        let slot = pg_sys::MakeSingleTupleTableSlot(tupdesc, &pg_sys::TTSOpsMinimalTuple);
        // detoasted texts, freed row by row
        let mut row_memory = PgMemoryContexts::new("pg_minhash sync rows");
        while pg_sys::tuplestore_gettupleslot(rows, true, false, slot) {
            pg_sys::check_for_interrupts!();
            let mut is_null = false;
            let id = pg_sys::slot_getattr(slot, id_attno as c_int, &mut is_null);
            let id = (!is_null).then(|| match id_type {
                pg_sys::INT2OID => i64::from(id.value() as i16),
                pg_sys::INT4OID => i64::from(id.value() as i32),
                _ => id.value() as i64,
            });
            let text = pg_sys::slot_getattr(slot, text_attno as c_int, &mut is_null);
            // a NULL text has no band rows, as in the sync function's SQL
            if is_null {
                continue;
            }
            let entry = row_memory.switch_to(|_| {
                let doc = <&str as FromDatum>::from_datum(text, false).expect("not NULL");
                band_entry(doc, cfg.k, cfg.shingling, cfg.banding)
            });
            row_memory.reset();
            let Some((keys, sketch)) = entry else {
                continue;
            };
            // the band table's id column is NOT NULL: the sync function's INSERT fails the same
            let Some(id) = id else {
                raise(
                    PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                    format!(
                        "null value in column \"id\" of relation \"{}\" violates not-null \
                         constraint",
                        relation_name(cfg.band_table)
                    ),
                    Some(format!(
                        "Rows of {} with a text need an id.",
                        regclass_name(tbl)
                    )),
                );
            };
            for key in keys {
                writer.push([id, key, sketch[0] as i64, sketch[1] as i64]);
            }
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}

/// Band rows on their way into an open band table: gathered `BATCH` at a time, then written to
/// the heap in one call and to each index.
struct BandWriter {
    band: pg_sys::Relation,
    estate: *mut pg_sys::EState,
    target: *mut pg_sys::ResultRelInfo,
    slots: Vec<*mut pg_sys::TupleTableSlot>,
    /// Slots of `slots` holding rows not yet written.
    pending: usize,
    command: pg_sys::CommandId,
}

impl BandWriter {
    /// A writer for `band` (open and locked for INSERT), if a direct write does what the sync
    /// function's `INSERT`, run as `owner`, would (see the module documentation); None after
    /// closing whatever it opened.
    ///
    /// # Safety
    /// `band` is open with RowExclusiveLock.
    unsafe fn open(band: pg_sys::Relation, owner: pg_sys::Oid) -> Option<BandWriter> {
        // SAFETY: reads of the open relation's cached catalog data; the executor state and the
        // indexes are set up as the executor sets up an INSERT's target (execMain.c,
        // execIndexing.c).
        unsafe {
            let class = &*(*band).rd_rel;
            let desc = (*band).rd_att;
            let columns = (*desc).attrs.as_slice((*desc).natts as usize);
            let plain = class.relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char
                && class.relam == pg_sys::HEAP_TABLE_AM_OID
                && !class.relispartition
                && !class.relrowsecurity
                && (*band).trigdesc.is_null()
                && (*band).rd_rules.is_null()
                && ((*desc).constr.is_null() || (*(*desc).constr).num_check == 0)
                && columns.len() == BAND_COLUMNS.len()
                && columns.iter().zip(BAND_COLUMNS).all(|(a, name)| {
                    !a.attisdropped
                        && a.atttypid == pg_sys::INT8OID
                        && a.attidentity == 0
                        && a.attgenerated == 0
                        && pgrx::name_data_to_str(&a.attname) == name
                })
                && pg_sys::pg_class_aclcheck((*band).rd_id, owner, pg_sys::ACL_INSERT as _)
                    == pg_sys::AclResult::ACLCHECK_OK;
            if !plain {
                return None;
            }
            let estate = pg_sys::CreateExecutorState();
            let target = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>())
                .cast::<pg_sys::ResultRelInfo>();
            pg_sys::InitResultRelInfo(target, band, 1, std::ptr::null_mut(), 0);
            pg_sys::ExecOpenIndices(target, false);
            // deferred uniqueness checks and exclusion constraints need the executor's queue
            let deferred = (0..(*target).ri_NumIndices as usize).any(|i| {
                let form = &*(*(*(*target).ri_IndexRelationDescs.add(i))).rd_index;
                (form.indisunique && !form.indimmediate) || form.indisexclusion
            });
            if deferred {
                pg_sys::ExecCloseIndices(target);
                pg_sys::FreeExecutorState(estate);
                return None;
            }
            Some(BandWriter {
                band,
                estate,
                target,
                slots: Vec::new(),
                pending: 0,
                command: pg_sys::GetCurrentCommandId(true),
            })
        }
    }

    /// Queues one band row `(id, key, sketch1, sketch2)`.
    fn push(&mut self, row: [i64; 4]) {
        // SAFETY: the slots are heap-tuple slots of the band table's descriptor, which `row`
        // matches (four int8 columns, checked in `open`); each owns the tuple stored in it.
        unsafe {
            if self.pending == self.slots.len() {
                self.slots.push(pg_sys::MakeSingleTupleTableSlot(
                    (*self.band).rd_att,
                    &pg_sys::TTSOpsHeapTuple,
                ));
            }
            let mut values = row.map(pg_sys::Datum::from);
            let mut nulls = [false; 4];
            let tuple = pg_sys::heap_form_tuple(
                (*self.band).rd_att,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            );
            pg_sys::ExecStoreHeapTuple(tuple, self.slots[self.pending], true);
        }
        self.pending += 1;
        if self.pending == BATCH {
            self.flush();
        }
    }

    /// Writes the queued rows: the heap in one call, then each row's index entries.
    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        // SAFETY: the slots hold materialized tuples of the band table; heap_multi_insert
        // sets each slot's TID, which the index entries then point to.
        unsafe {
            pg_sys::heap_multi_insert(
                self.band,
                self.slots.as_mut_ptr(),
                self.pending as c_int,
                self.command,
                0,
                std::ptr::null_mut(),
            );
            for &slot in &self.slots[..self.pending] {
                let recheck = pg_sys::ExecInsertIndexTuples(
                    self.target,
                    slot,
                    self.estate,
                    false,
                    false,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
                pg_sys::list_free(recheck);
                let per_tuple = (*self.estate).es_per_tuple_exprcontext;
                if !per_tuple.is_null() {
                    pg_sys::MemoryContextReset((*per_tuple).ecxt_per_tuple_memory);
                }
            }
        }
        self.pending = 0;
    }

    /// Writes what is queued and releases the slots, indexes and band table (its lock is kept
    /// until the transaction ends).
    fn close(mut self) {
        self.flush();
        // SAFETY: everything released here was made or opened in `open` and `push`.
        unsafe {
            for &slot in &self.slots {
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
            pg_sys::ExecCloseIndices(self.target);
            pg_sys::FreeExecutorState(self.estate);
            pg_sys::table_close(self.band, pg_sys::NoLock as c_int);
        }
    }
}

/// Runs the table's PL/pgSQL sync function for this trigger event, as PostgreSQL would have
/// had it been the trigger's function: same trigger data, so it sees the same transition table.
///
/// # Safety
/// `data` is the trigger data PostgreSQL passed to this trigger.
unsafe fn forward(data: &pg_sys::TriggerData, cfg: &IndexConfig, tbl: pg_sys::Oid) {
    if cfg.sync_function == pg_sys::InvalidOid {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
            format!("the sync function of {} does not exist", regclass_name(tbl)),
            Some("Drop the index with minhash_index_drop() and create it again.".into()),
        );
    }
    // SAFETY: as ExecCallTriggerFunc (trigger.c) calls a trigger function: fmgr looks up the
    // function (and wraps it for SECURITY DEFINER and SET), the trigger data goes in as the
    // call's context, and errors are turned into Rust panics at the boundary.
    unsafe {
        let mut flinfo = pg_sys::FmgrInfo::default();
        pg_sys::fmgr_info(cfg.sync_function, &mut flinfo);
        let mut call: pg_sys::FunctionCallInfoBaseData = std::mem::zeroed();
        call.flinfo = &mut flinfo;
        call.context = (data as *const pg_sys::TriggerData)
            .cast_mut()
            .cast::<pg_sys::Node>();
        call.fncollation = pg_sys::InvalidOid;
        call.nargs = 0;
        let function = flinfo.fn_addr.expect("fmgr_info sets the function address");
        pg_sys::ffi::pg_guard_ffi_boundary(|| function(&mut call));
    }
}

/// A relation's unqualified name, as PostgreSQL's constraint messages give it.
fn relation_name(rel: pg_sys::Oid) -> String {
    // SAFETY: NULL (checked) or a palloc'd C string.
    unsafe {
        let name = pg_sys::get_rel_name(rel);
        if name.is_null() {
            return rel.to_u32().to_string();
        }
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    }
}
