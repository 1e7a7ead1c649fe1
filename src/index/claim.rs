//! Claims: the band rows that `minhash_flag_duplicate` writes for its row *before* it looks for
//! near-duplicates, as PostgreSQL inserts an index entry before it checks an exclusion
//! constraint. A concurrent writer's check (with a dirty snapshot, see `lookup`) then finds
//! them and waits for this transaction to end, so of two near-duplicate rows written at the
//! same time the later check always sees the earlier row.
//!
//! The sync trigger at the end of the statement then finds the row's band rows already there:
//! it keeps a claim whose rows are still live and exactly the row's ([`take`]); otherwise (a
//! row changed by a later BEFORE trigger, a claim of another subtransaction) it writes the
//! row's band rows and only then deletes the claim's ([`release_row`]), so that a concurrent
//! check never finds the row's text missing. A claim outlives neither its statement nor its
//! subtransaction: the sync of an event releases the claims its statement left for rows of that
//! event (those made at its trigger depth, [`release_statement`]: a row ON CONFLICT DO NOTHING
//! or a trigger skipped); a claim is kept only by the
//! subtransaction that made it (rows kept by another one would outlive its rollback); claims
//! made in a subtransaction that rolls back are forgotten with it (their rows are dead); any
//! still open when the transaction commits are released then. So a committed band table holds
//! exactly the band rows of the table's rows. A band table given a new relfilenode while a
//! claim on it is open (a rewrite by a trigger in the middle of the statement) fails the
//! transaction (55000) rather than keep the claim's rows.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::core::capacity;
use crate::pg::compat;

use super::band::BandRow;
use super::key::{Id, KeyType};

/// One row's claimed band rows.
struct Claim {
    band: pg_sys::Oid,
    /// The band table's relfilenode when the rows were written.
    file: pg_sys::Oid,
    tids: Vec<pg_sys::ItemPointerData>,
    subxact: pg_sys::SubTransactionId,
    /// The trigger depth of the statement whose row it was made for.
    depth: i32,
    /// Whether it was made for a row an UPDATE writes (otherwise, one an INSERT writes).
    update: bool,
}

/// This transaction's open claims, by band table, id and (of a Citus table distributed by a
/// tenant, whose ids repeat across the tenants of one shard) tenant, oldest first.
type Claims = HashMap<(pg_sys::Oid, Id, Option<Id>), Vec<Claim>>;

thread_local! {
    static CLAIMS: RefCell<Claims> = RefCell::new(HashMap::new());

    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Records that the band rows at `tids` of the open band table `band` were written for the row
/// with id `id` (of tenant `tenant`, of a table distributed by a tenant) that an UPDATE
/// (`update`) or an INSERT writes.
pub(super) fn record(
    band: pg_sys::Relation,
    (id, tenant): (&Id, Option<&Id>),
    tids: Vec<pg_sys::ItemPointerData>,
    update: bool,
) {
    if !CALLBACKS_REGISTERED.replace(true) {
        // SAFETY: registered once per backend; the callbacks only touch `CLAIMS` and relations
        // of the current transaction.
        unsafe {
            pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
        }
    }
    // SAFETY: `band` is open.
    let (oid, file) = unsafe { ((*band).rd_id, (*(*band).rd_rel).relfilenode) };
    let claim = Claim {
        band: oid,
        file,
        tids,
        // SAFETY: inside a transaction.
        subxact: unsafe { pg_sys::GetCurrentSubTransactionId() },
        depth: trigger_depth(),
        update,
    };
    CLAIMS.with_borrow_mut(|claims| {
        capacity::reserve_map(claims, 1, "claimed rows").unwrap_or_else(|e| e.fail());
        let same = claims
            .entry((oid, id.clone(), tenant.cloned()))
            .or_default();
        capacity::push(same, claim, "claimed rows").unwrap_or_else(|e| e.fail());
    });
}

/// Whether this transaction has open claims on band table `band`.
pub(super) fn any(band: pg_sys::Oid) -> bool {
    CLAIMS.with_borrow(|claims| claims.keys().any(|&(b, _, _)| b == band))
}

/// For a row with id `id` (of tenant `tenant`) whose band rows are `rows`: if the latest claim
/// of that id (and tenant), made in the current subtransaction, holds exactly those rows, still
/// live, the claim is taken (they stay as the row's band rows) and its TIDs returned. Otherwise
/// None, and the claim stays open: the caller writes the row's band rows and then releases it
/// ([`release`]), so that the row's text is never absent from the band table meanwhile.
pub(super) fn take(
    band: pg_sys::Relation,
    (id, tenant): (&Id, Option<&Id>),
    rows: &mut [BandRow],
) -> Option<Vec<pg_sys::ItemPointerData>> {
    // SAFETY: `band` is open.
    let key = (unsafe { (*band).rd_id }, id.clone(), tenant.cloned());
    let (tids, same_subxact) = CLAIMS.with_borrow(|claims| {
        let claim = claims.get(&key)?.last()?;
        // SAFETY: `band` is open; the claim's rows were written by this transaction (the
        // relfilenode is checked before any TID is read).
        unsafe { check_file(band, claim) };
        // SAFETY: inside a transaction.
        let same_subxact = claim.subxact == unsafe { pg_sys::GetCurrentSubTransactionId() };
        Some((claim.tids.clone(), same_subxact))
    })?;
    if !same_subxact {
        return None;
    }
    let mut found = Vec::new();
    for tid in &tids {
        // SAFETY: `band` is open with RowExclusiveLock; the TID was written to its current
        // relfilenode (checked above).
        found.extend(unsafe { fetch_own(band, *tid) }?);
    }
    found.sort_unstable();
    rows.sort_unstable();
    if found != rows {
        return None;
    }
    remove_latest(band, (id, tenant));
    Some(tids)
}

/// Deletes the rows of the latest claim of id `id` (of tenant `tenant`) on the open band table
/// `band`, if any (the row it was made for is written by an UPDATE, whose band rows the sync
/// trigger rewrites).
pub(super) fn release(band: pg_sys::Relation, row: (&Id, Option<&Id>)) {
    if let Some(claim) = remove_latest(band, row) {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, &claim) };
    }
}

/// Releases the claims of the row with id `id` (of tenant `tenant`) on the open band table
/// `band` made at the current trigger depth: once the sync of its statement has written the
/// row's band rows or kept one of them ([`take`]), the others (of a row an UPDATE moved to
/// another partition, the row an INSERT ... ON CONFLICT DO UPDATE proposed).
pub(super) fn release_row(band: pg_sys::Relation, (id, tenant): (&Id, Option<&Id>)) {
    // SAFETY: `band` is open.
    let key = (unsafe { (*band).rd_id }, id.clone(), tenant.cloned());
    let depth = trigger_depth();
    let left: Vec<Claim> = CLAIMS.with_borrow_mut(|claims| {
        let Some(same) = claims.get_mut(&key) else {
            return Vec::new();
        };
        let (gone, kept) = std::mem::take(same)
            .into_iter()
            .partition(|c| c.depth == depth);
        *same = kept;
        if same.is_empty() {
            claims.remove(&key);
        }
        gone
    });
    for claim in &left {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, claim) };
    }
}

/// Releases the claims on the open band table `band` made at the current trigger depth for rows
/// an UPDATE (`update`) or an INSERT writes: those of the statement whose sync trigger of that
/// event is running that it did not take (of a row ON CONFLICT DO NOTHING or a trigger skipped).
/// The claims of the other event are left to its sync: a MERGE or an INSERT ... ON CONFLICT DO
/// UPDATE fires both, and the rows of the one that fires later must stay claimed until then.
pub(super) fn release_statement(band: pg_sys::Relation, update: bool) {
    // SAFETY: `band` is open.
    let oid = unsafe { (*band).rd_id };
    let depth = trigger_depth();
    let left: Vec<Claim> = CLAIMS.with_borrow_mut(|claims| {
        let mut left = Vec::new();
        claims.retain(|&(b, _, _), same| {
            if b == oid {
                let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(same)
                    .into_iter()
                    .partition(|c| c.depth == depth && c.update == update);
                left.extend(gone);
                *same = kept;
            }
            !same.is_empty()
        });
        left
    });
    for claim in &left {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, claim) };
    }
}

/// PostgreSQL's trigger depth now (`pg_trigger_depth()`): a statement's row triggers and its
/// statement triggers fire at the same depth, a statement run by a trigger one deeper.
pub(super) fn trigger_depth() -> i32 {
    // SAFETY: pg_trigger_depth takes no arguments and returns an int4.
    unsafe { pgrx::direct_function_call::<i32>(pg_sys::pg_trigger_depth, &[]) }
        .expect("pg_trigger_depth() is not NULL")
}

/// Raises 55000 if the band table got a new relfilenode since the claim's rows were written
/// (its TIDs would name other rows, and its rows would stay).
///
/// # Safety
/// `band` is the claim's band table, open.
unsafe fn check_file(band: pg_sys::Relation, claim: &Claim) {
    // SAFETY: per the contract.
    if claim.file != unsafe { (*(*band).rd_rel).relfilenode } {
        crate::pg::error::raise(
            pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the band table {} was rewritten while a duplicate check held band rows in it",
                crate::pg::names::regclass_name(claim.band)
            ),
            Some("Rewrite the band table in a transaction of its own.".into()),
        );
    }
}

/// Deletes the rows of every claim of id `id` on the open band table `band` (of a table not
/// distributed by a tenant).
pub(super) fn release_all(band: pg_sys::Relation, id: &Id) {
    while let Some(claim) = remove_latest(band, (id, None)) {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, &claim) };
    }
}

/// Removes the latest claim of `id` (of tenant `tenant`) on `band` from the list.
fn remove_latest(band: pg_sys::Relation, (id, tenant): (&Id, Option<&Id>)) -> Option<Claim> {
    // SAFETY: `band` is open.
    let key = (unsafe { (*band).rd_id }, id.clone(), tenant.cloned());
    CLAIMS.with_borrow_mut(|claims| {
        let same = claims.get_mut(&key)?;
        let claim = same.pop();
        if same.is_empty() {
            claims.remove(&key);
        }
        claim
    })
}

/// Deletes the rows of `claim` that are still live.
///
/// # Safety
/// `band` is the claim's band table, open with RowExclusiveLock.
unsafe fn delete_live(band: pg_sys::Relation, claim: &Claim) {
    // SAFETY: per the contract; a TID is used only in the relfilenode it was written to.
    unsafe {
        check_file(band, claim);
        for tid in &claim.tids {
            pg_sys::check_for_interrupts!();
            if fetch_own(band, *tid).is_some() {
                delete_own(band, *tid);
            }
        }
    }
}

/// Deletes the row at `tid`, which this transaction wrote, maybe in the current command: the
/// command counter moves on first, as between two statements, so that the row is visible to
/// the delete.
///
/// # Safety
/// `band` is open with RowExclusiveLock; the row at `tid` is live and this transaction's.
unsafe fn delete_own(band: pg_sys::Relation, tid: pg_sys::ItemPointerData) {
    // SAFETY: per the contract.
    unsafe {
        pg_sys::CommandCounterIncrement();
        pg_sys::simple_heap_delete(band, &tid as *const _ as *mut _);
    }
}

/// The band rows `(id, key, [sketch1, sketch2])` of the band table's row at `tid` (of format 1
/// one, of format 2 one per band), if this transaction wrote it and has not deleted it.
///
/// # Safety
/// `band` is a band table (its live columns an id and int8s), open, in this transaction; `tid`
/// was written to its current relfilenode.
unsafe fn fetch_own(band: pg_sys::Relation, tid: pg_sys::ItemPointerData) -> Option<Vec<BandRow>> {
    // SAFETY: per the contract. The TID's block exists (nothing shrinks a relfilenode while a
    // transaction's own rows in it are live); heap_fetch checks the line pointer, and pins the
    // buffer only when it returns true.
    unsafe {
        let mut tuple = pg_sys::HeapTupleData {
            t_self: tid,
            ..Default::default()
        };
        let mut buffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
        let snapshot = std::ptr::addr_of_mut!(pg_sys::SnapshotSelfData);
        if !pg_sys::heap_fetch(band, snapshot, &mut tuple, &mut buffer, false) {
            return None;
        }
        let own =
            pg_sys::TransactionIdIsCurrentTransactionId((*tuple.t_data).t_choice.t_heap.t_xmin);
        let desc = (*band).rd_att;
        // the live columns by name: id (of its key type), then int8 columns: of format 1 key,
        // sketch1, sketch2; of format 2 sketch1, sketch2, key1, key2, ...
        // (a column is NULL only in a band table that is not ours, which no claim matches)
        let (mut id, mut keys, mut sketch) = (None, Vec::new(), [i64::MIN; 2]);
        for (attr, attno) in compat::attributes(desc).iter().zip(1..) {
            if attr.attisdropped {
                continue;
            }
            let mut is_null = false;
            let value = pg_sys::heap_getattr(&mut tuple, attno, desc, &mut is_null);
            let int = if is_null {
                i64::MIN
            } else {
                value.value() as i64
            };
            match pgrx::name_data_to_str(&attr.attname) {
                "id" if !is_null => id = Some(KeyType::of(attr.atttypid).id(value, attr.atttypid)),
                "sketch1" => sketch[0] = int,
                "sketch2" => sketch[1] = int,
                name if name.starts_with("key") => keys.push(int),
                _ => {}
            }
        }
        let id = id.unwrap_or(Id::Int(i64::MIN));
        let rows = keys
            .into_iter()
            .map(|key| (id.clone(), key, sketch))
            .collect();
        pg_sys::ReleaseBuffer(buffer);
        own.then_some(rows)
    }
}

/// Releases every open claim before the transaction commits or is prepared; forgets them when
/// it ends.
#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    match event {
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
            let claims = CLAIMS.take();
            for claim in claims.values().flatten() {
                // SAFETY: still inside the transaction that wrote the rows; the lock taken
                // when they were written is held.
                unsafe {
                    let band =
                        pg_sys::try_table_open(claim.band, pg_sys::RowExclusiveLock as c_int);
                    if !band.is_null() {
                        delete_live(band, claim);
                        pg_sys::table_close(band, pg_sys::NoLock as c_int);
                    }
                }
            }
        }
        _ => CLAIMS.with_borrow_mut(HashMap::clear),
    }
}

/// A subtransaction that rolls back takes its claims with it; one that commits hands them to
/// its parent.
#[pg_guard]
unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    subxact: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    CLAIMS.with_borrow_mut(|claims| match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => claims.retain(|_, same| {
            same.retain(|c| c.subxact != subxact);
            !same.is_empty()
        }),
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
            for claim in claims
                .values_mut()
                .flatten()
                .filter(|c| c.subxact == subxact)
            {
                claim.subxact = parent;
            }
        }
        _ => {}
    });
}
