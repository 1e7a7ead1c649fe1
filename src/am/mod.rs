//! The sketch store: the index access method `minhash_sketch`, which keeps, for every heap
//! tuple, its TID and the fixed-width bytea value of the index's one key (a
//! `minhash_sketch(...)` expression), packed many to a page, so that a lookup reads every
//! sketch of a table at memory speed ([`read::scan_entries`]).
//!
//! Being an index, it is kept exact by PostgreSQL itself under every write path, isolation
//! level, partition, replica and crash. docs/internals.md, "The sketch store", describes the
//! layout, WAL, VACUUM and locking. The handler below is the table of contents: each step of
//! an index's life points at the file that owns it.

use pgrx::datum::Internal;
use pgrx::prelude::*;

mod buffer;
mod build;
mod insert;
mod page;
mod planner;
pub(crate) mod read;
mod sql;
mod vacuum;
mod value;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// The handler of access method `minhash_sketch`.
#[pg_extern(sql = r#"
CREATE FUNCTION @extschema@.minhash_sketch_handler(internal) RETURNS index_am_handler
LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
CREATE ACCESS METHOD minhash_sketch TYPE INDEX HANDLER @extschema@.minhash_sketch_handler;
CREATE OPERATOR CLASS @extschema@.bytea_minhash_sketch_ops
    DEFAULT FOR TYPE bytea USING minhash_sketch AS STORAGE bytea;
"#)]
fn minhash_sketch_handler(_fcinfo: pg_sys::FunctionCallInfo) -> Internal {
    // SAFETY: a zeroed node of the type the caller expects, in its memory context; every
    // field not set here is false, 0 or NULL (no such callback).
    let mut am =
        unsafe { PgBox::<pg_sys::IndexAmRoutine>::alloc_node(pg_sys::NodeTag::T_IndexAmRoutine) };
    // no strategies, no support functions, one key column, nothing unique, ordered or
    // returned: the planner has nothing to use it for
    am.amstrategies = 0;
    am.amsupport = 0;
    am.amoptsprocnum = 0;
    am.amcanmulticol = false;
    am.amoptionalkey = false;
    am.amkeytype = pg_sys::InvalidOid;

    am.ambuild = Some(build::ambuild);
    am.ambuildempty = Some(build::ambuildempty);
    am.aminsert = Some(insert::aminsert);
    am.ambulkdelete = Some(vacuum::ambulkdelete);
    am.amvacuumcleanup = Some(vacuum::amvacuumcleanup);
    am.amcostestimate = Some(planner::amcostestimate);
    am.amoptions = Some(planner::amoptions);
    am.amvalidate = Some(planner::amvalidate);
    am.ambeginscan = Some(planner::ambeginscan);
    am.amrescan = Some(planner::amrescan);
    am.amendscan = Some(planner::amendscan);
    Internal::from(Some(pg_sys::Datum::from(am.into_pg())))
}
