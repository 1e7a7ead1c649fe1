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
//! check never finds the row's text missing. A claim outlives neither its query nor its
//! subtransaction. What the syncs of a query leave (a row ON CONFLICT DO NOTHING skipped) is
//! released once all of them have fired: when the query's `ExecutorFinish` returns
//! ([`hook_query_ends`]), which releases the claims made since the query started. A sync never
//! releases the claims of another sync of its query (two parts of one query that write one
//! band table with the same event through different tables, a partition and the partitioned
//! table, fire a sync each) nor those of an enclosing query still running (a function the
//! query calls runs statements whose syncs fire before the query's). A statement run outside
//! the executor (COPY, the logical replication worker), which fires one sync per table and
//! event, releases what its sync of an event leaves at once ([`release_statement`]). A claim is
//! kept only by the subtransaction that made it (rows kept by another one would outlive its
//! rollback); claims made in a subtransaction that rolls back are forgotten with it (their rows
//! are dead); any still open when the transaction commits are released then. So a committed
//! band table holds exactly the band rows of the table's rows. A band table given a new
//! relfilenode while a claim on it is open (a rewrite by a trigger in the middle of the
//! statement) fails the transaction (55000) rather than keep the claim's rows.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_void};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::core::capacity;
use crate::pg::compat;

use crate::index::def::band::BandRow;
use crate::index::def::row_id::{Id, KeyType};

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
    /// The query that wrote the row ([`query_now`]).
    query: pg_sys::CommandId,
}

/// A claim's band table, id and (of a Citus table distributed by a tenant, whose ids repeat
/// across the tenants of one shard) tenant.
type Key = (pg_sys::Oid, Id, Option<Id>);

/// This transaction's open claims, by [`Key`], oldest first, and how many each query made
/// (by its command id): the end of a query finds in constant time whether it left any.
#[derive(Default)]
struct Open {
    claims: HashMap<Key, Vec<Claim>>,
    by_query: BTreeMap<pg_sys::CommandId, usize>,
}

impl Open {
    fn push(&mut self, key: Key, claim: Claim) {
        capacity::reserve_map(&mut self.claims, 1, "claimed rows").unwrap_or_else(|e| e.fail());
        *self.by_query.entry(claim.query).or_default() += 1;
        let same = self.claims.entry(key).or_default();
        capacity::push(same, claim, "claimed rows").unwrap_or_else(|e| e.fail());
    }

    /// Removes the latest claim of `key`.
    fn pop_latest(&mut self, key: &Key) -> Option<Claim> {
        let same = self.claims.get_mut(key)?;
        let claim = same.pop();
        if same.is_empty() {
            self.claims.remove(key);
        }
        claim.inspect(|c| self.forget_query(c))
    }

    /// Removes the claims of `key` for which `gone` holds.
    fn remove_of(&mut self, key: &Key, gone: impl Fn(&Claim) -> bool) -> Vec<Claim> {
        let Some(same) = self.claims.get_mut(key) else {
            return Vec::new();
        };
        let (left, kept): (Vec<_>, Vec<_>) = std::mem::take(same).into_iter().partition(gone);
        *same = kept;
        if same.is_empty() {
            self.claims.remove(key);
        }
        left.iter().for_each(|c| self.forget_query(c));
        left
    }

    /// Removes the claims on the band tables for which `band` holds for which `gone` holds.
    fn remove_where(
        &mut self,
        band: impl Fn(pg_sys::Oid) -> bool,
        gone: impl Fn(&Claim) -> bool,
    ) -> Vec<Claim> {
        let mut left = Vec::new();
        self.claims.retain(|&(b, _, _), same| {
            if band(b) {
                let (out, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(same).into_iter().partition(&gone);
                left.extend(out);
                *same = kept;
            }
            !same.is_empty()
        });
        left.iter().for_each(|c| self.forget_query(c));
        left
    }

    fn forget_query(&mut self, claim: &Claim) {
        if let Some(n) = self.by_query.get_mut(&claim.query) {
            *n -= 1;
            if *n == 0 {
                self.by_query.remove(&claim.query);
            }
        }
    }

    /// Whether a claim made by query `query` or a later one is open.
    fn made_since(&self, query: pg_sys::CommandId) -> bool {
        self.by_query.range(query..).next().is_some()
    }
}

thread_local! {
    static CLAIMS: RefCell<Open> = RefCell::new(Open::default());

    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };

    /// The queries whose `ExecutorFinish` runs now, innermost last ([`query_now`]).
    static FINISHING: RefCell<Vec<pg_sys::CommandId>> = const { RefCell::new(Vec::new()) };
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
        query: query_now(),
    };
    CLAIMS.with_borrow_mut(|open| open.push((oid, id.clone(), tenant.cloned()), claim));
}

/// Whether this transaction has open claims on band table `band`.
pub(super) fn any(band: pg_sys::Oid) -> bool {
    CLAIMS.with_borrow(|open| open.claims.keys().any(|&(b, _, _)| b == band))
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
    let (tids, same_subxact) = CLAIMS.with_borrow(|open| {
        let claim = open.claims.get(&key)?.last()?;
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
    let left = CLAIMS.with_borrow_mut(|open| open.remove_of(&key, |c| c.depth == depth));
    for claim in &left {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, claim) };
    }
}

/// Releases what the sync trigger of an UPDATE (`update`) or an INSERT that runs now leaves on
/// the open band table `band`: the claims its statement made for rows of that event which it
/// did not take (of a row ON CONFLICT DO NOTHING skipped). Within the `ExecutorFinish` of its
/// query, where the query's other syncs may not have fired yet (another part of the query that
/// writes the band table through another table, the other event of a MERGE or an INSERT ...
/// ON CONFLICT DO UPDATE), this leaves them to the query's end ([`hook_query_ends`]).
/// Otherwise (COPY, the logical replication worker: one sync per table and event) it releases
/// those made by its statement (its query, at its trigger depth) for rows of its event; the
/// claims of the other event are left to its sync.
pub(super) fn release_statement(band: pg_sys::Relation, update: bool) {
    let query = query_now();
    if FINISHING.with_borrow(|finishing| finishing.last() == Some(&query)) {
        return;
    }
    // SAFETY: `band` is open.
    let oid = unsafe { (*band).rd_id };
    let depth = trigger_depth();
    let left = CLAIMS.with_borrow_mut(|open| {
        open.remove_where(
            |b| b == oid,
            |c| c.depth == depth && c.update == update && c.query == query,
        )
    });
    for claim in &left {
        // SAFETY: `band` is open with RowExclusiveLock.
        unsafe { delete_live(band, claim) };
    }
}

/// The query whose rows are written or whose statement triggers fire now, as the command id
/// its snapshot reads at (PostgreSQL fires the AFTER STATEMENT triggers of every part of a
/// query at the query's end, under the query's snapshot, which its parts wrote their rows
/// under). A query started later in the transaction has a greater one: a data-modifying query
/// uses its command id, so the next one gets another. None without an active snapshot.
pub(super) fn running_query() -> Option<pg_sys::CommandId> {
    // SAFETY: reads the active snapshot, if there is one.
    unsafe { pg_sys::ActiveSnapshotSet().then(|| (*pg_sys::GetActiveSnapshot()).curcid) }
}

/// [`running_query`], or without an active snapshot the transaction's current command id.
fn query_now() -> pg_sys::CommandId {
    // SAFETY: reads the transaction's command counter.
    running_query().unwrap_or_else(|| unsafe { pg_sys::GetCurrentCommandId(false) })
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
    CLAIMS.with_borrow_mut(|open| open.pop_latest(&key))
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

/// Deletes the live rows of `claims`, each band table opened (a band table dropped since has
/// none).
///
/// # Safety
/// Inside the transaction that wrote the rows; the lock taken when they were written is held.
unsafe fn delete_claims(claims: &[Claim]) {
    for claim in claims {
        // SAFETY: per the contract.
        unsafe {
            let band = pg_sys::try_table_open(claim.band, pg_sys::RowExclusiveLock as c_int);
            if !band.is_null() {
                delete_live(band, claim);
                pg_sys::table_close(band, pg_sys::NoLock as c_int);
            }
        }
    }
}

/// Releases every open claim before the transaction commits or is prepared; forgets them when
/// it ends.
#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    match event {
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
            let open = CLAIMS.take();
            let claims: Vec<Claim> = open.claims.into_values().flatten().collect();
            // SAFETY: still inside the transaction that wrote the rows.
            unsafe { delete_claims(&claims) };
        }
        _ => drop(CLAIMS.take()),
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
    CLAIMS.with_borrow_mut(|open| match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => {
            open.remove_where(|_| true, |c| c.subxact == subxact);
        }
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
            for claim in open
                .claims
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

/// The `ExecutorFinish` hook in place before ours.
static mut PREVIOUS_FINISH: pg_sys::ExecutorFinish_hook_type = None;

/// Puts [`finish_query`] in PostgreSQL's `ExecutorFinish` hook (from `_PG_init`).
pub(in crate::index) fn hook_query_ends() {
    // SAFETY: `_PG_init` runs once per backend, before any query of ours; the hook chain is
    // kept.
    unsafe {
        PREVIOUS_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(finish_query);
    }
}

/// `ExecutorFinish` with the end of a query's claims: a query's AFTER triggers (its syncs among
/// them) fire in its `ExecutorFinish`; once it returns, the claims made since the query started
/// (by the query or by the statements it ran whose triggers it fired, such as the cascaded
/// writes of a foreign key; a statement that fires its own triggers released its claims when it
/// finished) are released. A query that leaves its triggers to the query that runs it
/// (`EXEC_FLAG_SKIP_TRIGGERS`) leaves its claims to that query too. One lookup in a map of
/// about one entry per query running in the backend when no claim is left.
#[pg_guard]
unsafe extern "C-unwind" fn finish_query(query_desc: *mut pg_sys::QueryDesc) {
    // SAFETY: PostgreSQL calls the hook with a started query.
    let fires = unsafe { (*(*query_desc).estate).es_top_eflags }
        & pg_sys::EXEC_FLAG_SKIP_TRIGGERS as c_int
        == 0;
    let query = query_now();
    let finishing = fires.then(|| Finishing::enter(query));
    // SAFETY: the hook's contract; an error raised inside comes back as a Rust panic (the
    // guard then leaves `FINISHING` as it was).
    unsafe {
        match PREVIOUS_FINISH {
            Some(previous) => pg_sys::ffi::pg_guard_ffi_boundary(|| previous(query_desc)),
            None => pg_sys::standard_ExecutorFinish(query_desc),
        }
    }
    drop(finishing);
    // (a transaction that failed meanwhile forgets its claims when it ends)
    if fires
        && CLAIMS.with_borrow(|open| open.made_since(query))
        // SAFETY: reads the transaction's state.
        && unsafe { pg_sys::IsTransactionState() }
    {
        let left = CLAIMS.with_borrow_mut(|open| open.remove_where(|_| true, |c| c.query >= query));
        // SAFETY: inside the transaction that wrote the claims' rows.
        unsafe { delete_claims(&left) };
    }
}

/// A query in `FINISHING` until dropped.
struct Finishing;

impl Finishing {
    fn enter(query: pg_sys::CommandId) -> Finishing {
        FINISHING.with_borrow_mut(|finishing| {
            capacity::push(finishing, query, "running queries").unwrap_or_else(|e| e.fail())
        });
        Finishing
    }
}

impl Drop for Finishing {
    fn drop(&mut self) {
        FINISHING.with_borrow_mut(Vec::pop);
    }
}
