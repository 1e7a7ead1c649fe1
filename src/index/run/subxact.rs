//! A block that catches errors, as PL/pgSQL's `BEGIN ... EXCEPTION WHEN ... END` does: what it
//! runs is a subtransaction, rolled back with all it did when it fails.

use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Runs `f` in a subtransaction, and returns what it returns. If it raises an error whose
/// SQLSTATE `catches` accepts, the subtransaction is rolled back and the error's message
/// (PL/pgSQL's `SQLERRM`) returned; any other error is raised again after the rollback, as
/// PL/pgSQL does.
pub(in crate::index) fn catching<T>(
    catches: impl Fn(PgSqlErrorCode) -> bool,
    f: impl FnOnce() -> T,
) -> Result<T, String> {
    // SAFETY: as pl_exec.c's exec_stmt_block: the subtransaction is begun here and released or
    // rolled back below on every way out, and the memory context and resource owner of the
    // caller are restored after either.
    let (context, owner) = unsafe {
        let saved = (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner);
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(saved.0);
        saved
    };
    let result = PgTryBuilder::new(AssertUnwindSafe(|| Ok(f())))
        .catch_others(|e| Err(Box::new(e)))
        .execute();
    // SAFETY: see above.
    unsafe {
        match result {
            Ok(_) => pg_sys::ReleaseCurrentSubTransaction(),
            Err(_) => pg_sys::RollbackAndReleaseCurrentSubTransaction(),
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    }
    match result.map_err(|e| *e) {
        Ok(value) => Ok(value),
        Err(CaughtError::PostgresError(e) | CaughtError::ErrorReport(e))
            if catches(e.sql_error_code()) =>
        {
            Err(e.message().to_owned())
        }
        Err(e) => e.rethrow(),
    }
}

/// What PL/pgSQL's `WHEN OTHERS` catches: every error but a cancel and a failed assertion.
pub(in crate::index) fn others(code: PgSqlErrorCode) -> bool {
    !matches!(
        code,
        PgSqlErrorCode::ERRCODE_QUERY_CANCELED | PgSqlErrorCode::ERRCODE_ASSERT_FAILURE
    )
}
