//! Raising PostgreSQL errors with SQLSTATEs from the SQL layer.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

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
