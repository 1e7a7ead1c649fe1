//! Raising PostgreSQL errors with SQLSTATEs from the SQL layer.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::core::capacity::CapacityError;
use crate::core::params::ParamError;

/// Raises an ERROR with `code`, `message` and an optional hint; never returns.
pub fn raise(code: PgSqlErrorCode, message: impl Into<String>, hint: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, message.into(), "pg_minhash");
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR reports do not return")
}

/// Raises an ERROR with `code`, `message`, a detail and a hint; never returns.
pub fn raise_detailed(code: PgSqlErrorCode, message: String, detail: String, hint: String) -> ! {
    ErrorReport::new(code, message, "pg_minhash")
        .set_detail(detail)
        .set_hint(hint)
        .report(PgLogLevel::ERROR);
    unreachable!("ERROR reports do not return")
}

/// Reports a NOTICE (SQLSTATE 00000, as PL/pgSQL's `RAISE NOTICE`).
pub fn notice(message: String) {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        message,
        "pg_minhash",
    )
    .report(PgLogLevel::NOTICE);
}

/// Unwraps a core result, raising 22023 invalid_parameter_value on a rejected argument.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, ParamError> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                e.message,
                e.hint,
            )
        })
    }
}

impl<T> OrRaise<T> for Result<T, CapacityError> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| raise_capacity(e))
    }
}

/// Raises 53200 out_of_memory for a failed allocation, 54000 program_limit_exceeded for a
/// result over a hard limit, 53100 disk_full or 58030 io_error for a temporary file, 53400 past temp_file_limit. Also the core's handler for the functions that keep an infallible
/// signature (see [`install_capacity_handler`]).
pub fn raise_capacity(e: CapacityError) -> ! {
    let code = match e {
        CapacityError::OutOfMemory { .. } => PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        CapacityError::TooLarge { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        CapacityError::TempFile { errno } if errno == libc::ENOSPC => {
            PgSqlErrorCode::ERRCODE_DISK_FULL
        }
        CapacityError::TempFile { .. } => PgSqlErrorCode::ERRCODE_IO_ERROR,
        CapacityError::TempFileLimit { .. } => PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
    };
    raise(code, e.to_string(), None)
}

/// Makes a capacity error in the core's infallible functions (`Signer::signature`,
/// `ShingleSet::new`, ...) raise its SQLSTATE instead of panicking. Called from `_PG_init`.
pub fn install_capacity_handler() {
    crate::core::capacity::set_handler(raise_capacity);
}
