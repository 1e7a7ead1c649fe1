//! What the planner and the catalog ask of the access method: it is never scanned by a plan
//! (its opclass has no operators, and its cost is prohibitive should a path ever be priced),
//! it takes no options, and its one opclass (storage only) is valid.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::buffer::name;
use crate::pg::error::raise;

/// The cost of a path that is never to be chosen (the planner's `disable_cost`).
const NEVER: f64 = 1.0e10;

#[pg_guard]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C-unwind" fn amcostestimate(
    _root: *mut pg_sys::PlannerInfo,
    _path: *mut pg_sys::IndexPath,
    _loop_count: f64,
    startup_cost: *mut pg_sys::Cost,
    total_cost: *mut pg_sys::Cost,
    selectivity: *mut pg_sys::Selectivity,
    correlation: *mut f64,
    pages: *mut f64,
) {
    // SAFETY: the planner passes its output variables.
    unsafe {
        *startup_cost = NEVER;
        *total_cost = NEVER;
        *selectivity = 1.0;
        *correlation = 0.0;
        *pages = 0.0;
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amoptions(
    reloptions: pg_sys::Datum,
    validate: bool,
) -> *mut pg_sys::bytea {
    if validate && !reloptions.is_null() {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "access method \"minhash_sketch\" takes no options",
            None,
        );
    }
    std::ptr::null_mut()
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    _nkeys: std::ffi::c_int,
    _norderbys: std::ffi::c_int,
) -> pg_sys::IndexScanDesc {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!(
            "index \"{}\" of access method \"minhash_sketch\" cannot be scanned",
            name(index)
        ),
        Some("Its sketches are read by pg_minhash's lookups.".into()),
    )
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amrescan(
    _scan: pg_sys::IndexScanDesc,
    _keys: pg_sys::ScanKey,
    _nkeys: std::ffi::c_int,
    _orderbys: pg_sys::ScanKey,
    _norderbys: std::ffi::c_int,
) {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "an index of access method \"minhash_sketch\" cannot be scanned",
        None,
    )
}

/// (never reached: no scan begins)
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amendscan(_scan: pg_sys::IndexScanDesc) {}
