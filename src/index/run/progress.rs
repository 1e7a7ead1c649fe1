//! Progress of the long maintenance calls (`minhash_index_check`, `minhash_index_stats`), as
//! `minhash_index_create` reports it: their SQL counts each row it reads through
//! [`_minhash_progress`], and a call on a large table (a million rows or band rows to read, or
//! more) or one that has run for two seconds reports in a NOTICE at each further tenth of its
//! rows: rows done, percentage and rate. The whole-table searches report the same way
//! ([`search_started`]).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use pgrx::prelude::*;

use crate::pg::error::notice;

/// How long a call on a smaller table runs before it reports.
const QUIET: Duration = Duration::from_secs(2);

/// The rows (and band rows) to read from which a call reports from the start.
const LARGE: i64 = 1_000_000;

/// The call being counted.
struct Run {
    /// Its id (see [`_minhash_progress`]).
    id: f64,
    started: Instant,
    done: i64,
    /// The tenth of the rows last reported.
    reported: i64,
}

thread_local! {
    static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
}

/// Counts `weight` of the `total` `unit` (e.g. "rows") that `what` (e.g. "minhash_index_check on
/// public.docs") reads, for the call with id `run` (a value of its own, such as its start
/// time); reports as described above. True. (A weight above 1 counts a sample: the SQL calls
/// this for one band row in 64, by its key, with weight 64, as a call costs about as much as
/// reading a band row.) Parallel restricted: one backend counts every row.
#[pg_extern(volatile, parallel_restricted, schema = "minhash_internal")]
fn _minhash_progress(what: &str, unit: &str, total: i64, run: f64, weight: i64) -> bool {
    RUN.with_borrow_mut(|current| {
        let state = match current {
            Some(state) if state.id == run => state,
            _ => current.insert(Run {
                id: run,
                started: Instant::now(),
                done: 0,
                reported: 0,
            }),
        };
        state.done = state.done.saturating_add(weight);
        let tenth = if total > 0 {
            state.done.saturating_mul(10) / total
        } else {
            0
        };
        if tenth > state.reported && tenth < 10 {
            state.reported = tenth;
            let elapsed = state.started.elapsed();
            if total >= LARGE || elapsed >= QUIET {
                let rate = state.done as f64 / elapsed.as_secs_f64();
                notice(format!(
                    "{what}: {} of {total} {unit} ({}%), {} {unit}/s",
                    state.done,
                    tenth * 10,
                    rate.round()
                ));
            }
        }
    });
    true
}

/// An id for a call counted by [`_minhash_progress`]: the time it started, in seconds since
/// 1970.
pub(in crate::index) fn run_id() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |t| t.as_secs_f64())
}

/// How often a whole-table search reports while it reads the rows (their number is not known
/// ahead).
const READING_EVERY: Duration = Duration::from_secs(10);

/// The whole-table search of this backend being reported.
struct Search {
    what: &'static str,
    started: Instant,
    /// When the rows read were last reported, and the tenth of the bands.
    read_reported: Instant,
    bands_reported: usize,
}

thread_local! {
    static SEARCH: RefCell<Option<Search>> = const { RefCell::new(None) };
}

/// Starts reporting the whole-table search `what` (e.g. "minhash_duplicates"): once it has run
/// for two seconds, a NOTICE every ten seconds while it reads the rows ([`rows_read`]), then at
/// each further tenth of the bands searched ([`bands_searched`]).
pub(in crate::index) fn search_started(what: &'static str) {
    let now = Instant::now();
    SEARCH.set(Some(Search {
        what,
        started: now,
        read_reported: now,
        bands_reported: 0,
    }));
}

/// `rows` have been read and signed so far.
pub(in crate::index) fn rows_read(rows: usize) {
    SEARCH.with_borrow_mut(|search| {
        let Some(search) = search else { return };
        let elapsed = search.started.elapsed();
        if elapsed >= QUIET && search.read_reported.elapsed() >= READING_EVERY.min(elapsed) {
            search.read_reported = Instant::now();
            notice(format!(
                "{}: {rows} rows read and signed, {} rows/s",
                search.what,
                (rows as f64 / elapsed.as_secs_f64()).round()
            ));
        }
    });
}

/// `done` of the `total` bands have been searched (the report the core calls: see
/// `core::dedup::Corpus::report_progress`).
pub(in crate::index) fn bands_searched(done: usize, total: usize) {
    SEARCH.with_borrow_mut(|search| {
        let Some(search) = search else { return };
        let tenth = done * 10 / total.max(1);
        if tenth > search.bands_reported && done < total {
            search.bands_reported = tenth;
            if search.started.elapsed() >= QUIET {
                notice(format!(
                    "{}: {done} of {total} bands searched ({}%)",
                    search.what,
                    done * 100 / total
                ));
            }
        }
    });
}
