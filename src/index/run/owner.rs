//! Acting as an indexed table's owner. Everything that writes a band table, and every read of
//! an indexed table that is not the caller's own query, runs as the table's owner inside a
//! security-restricted operation, the way PostgreSQL maintains indexes and refreshes
//! materialized views (`index.c`, `matview.c`): whatever code the owner attached to the table
//! runs with the owner's rights, never with those of the role that happened to write the table
//! or call the function, and it can neither change role nor create temporary objects. The
//! search path is `pg_catalog, pg_temp` meanwhile, so no name in our SQL resolves to an object
//! the caller made.

use std::ffi::{c_int, CStr};

use pgrx::prelude::*;
use pgrx::{JsonB, PgSqlErrorCode};

use crate::pg::error::raise;
use crate::pg::names::{regclass_name, Regclass};

use super::spi::first_value;

/// The search path inside [`as_owner`].
const SAFE_SEARCH_PATH: &CStr = c"pg_catalog, pg_temp";

/// A setting changed for a while (the search path of [`with_safe_search_path`]), restored
/// when this is dropped, also while an error unwinds through it. Every other setting changed
/// inside the scope, by anyone's code and however (`SET`, `SET LOCAL`, `set_config`, a
/// function's `SET` clause), is discarded with it, as `index_build` discards what an index
/// expression sets: nothing done inside leaks into the caller's session.
pub(crate) struct SettingScope {
    nest_level: c_int,
}

impl SettingScope {
    /// Sets `name` to `value` until the scope is dropped.
    pub(crate) fn enter(name: &CStr, value: &CStr) -> Self {
        // SAFETY: a GUC nest level opened here and closed by `drop`, as fmgr_security_definer
        // does for a function's SET clause (GUC_ACTION_SAVE is allowed in parallel mode).
        unsafe {
            let nest_level = pg_sys::NewGUCNestLevel();
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
            SettingScope { nest_level }
        }
    }
}

impl Drop for SettingScope {
    fn drop(&mut self) {
        // SAFETY: pops the level `enter` opened, restoring every setting changed at or above
        // it (isCommit = false, as index_build and the matview refresh do); does not raise.
        unsafe { pg_sys::AtEOXact_GUC(false, self.nest_level) };
    }
}

/// Runs `f` with the search path `pg_catalog, pg_temp`.
pub(in crate::index) fn with_safe_search_path<T>(f: impl FnOnce() -> T) -> T {
    let scope = SettingScope::enter(c"search_path", SAFE_SEARCH_PATH);
    let result = f();
    drop(scope);
    result
}

/// The role and security context saved by [`as_owner`], restored when it is dropped, also
/// while an error unwinds through it.
struct OwnerScope {
    user: pg_sys::Oid,
    context: c_int,
}

impl Drop for OwnerScope {
    fn drop(&mut self) {
        // SAFETY: restores what `as_owner` saved; does not raise.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

/// Runs `f` as `owner` inside a security-restricted operation with the safe search path.
pub(crate) fn as_owner<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let mut scope = OwnerScope {
        user: pg_sys::InvalidOid,
        context: 0,
    };
    // SAFETY: as index_build() switches to the table owner: the previous role and context are
    // saved first and restored by `scope` on every way out (a transaction abort would also
    // restore them).
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut scope.user, &mut scope.context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            scope.context | pg_sys::SECURITY_RESTRICTED_OPERATION as c_int,
        );
    }
    // (the search path is popped before the role is restored, innermost first)
    let result = with_safe_search_path(f);
    drop(scope);
    result
}

/// The owner of relation `rel`; 42P01 if it does not exist.
pub(crate) fn relation_owner(rel: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    let owner = unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as c_int,
            pg_sys::Datum::from(rel),
        );
        if tuple.is_null() {
            None
        } else {
            let form = pg_sys::GETSTRUCT(tuple).cast::<pg_sys::FormData_pg_class>();
            let owner = (*form).relowner;
            pg_sys::ReleaseSysCache(tuple);
            Some(owner)
        }
    };
    owner.unwrap_or_else(|| {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("relation with OID {} does not exist", rel.to_u32()),
            None,
        )
    })
}

/// The owner of `tbl`, if the current user has its privileges (is the owner, a member of the
/// owning role, or a superuser), as PostgreSQL requires of whoever alters a table; 42501
/// otherwise.
pub(crate) fn check_owner(tbl: pg_sys::Oid) -> pg_sys::Oid {
    let owner = relation_owner(tbl);
    // SAFETY: a role membership check of two role OIDs.
    if !unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) } {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("must be owner of table {}", regclass_name(tbl)),
            None,
        );
    }
    owner
}

/// Internal to the index functions of `src/index/sql/`: runs the statement `sql` as the owner of
/// `tbl` (see the module documentation) and returns the first column of its first row, which
/// must be jsonb if there is one. The caller must have the owner's privileges (42501): this
/// acts with no rights the caller does not already have, and with fewer.
#[pg_extern(volatile, parallel_unsafe, schema = "minhash_internal")]
fn _minhash_as_owner(tbl: Option<Regclass>, sql: Option<&str>) -> Option<JsonB> {
    let (Some(Regclass(tbl)), Some(sql)) = (tbl, sql) else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "tbl and sql must not be NULL",
            None,
        );
    };
    owner_statement(tbl, sql, first_value::<JsonB>)
}

/// Runs the statement `sql` as the owner of `tbl` (see the module documentation) and returns
/// what `read` makes of its result. The caller must have the owner's privileges (42501), as
/// for [`_minhash_as_owner`], which the SQL the event trigger runs calls for the same.
pub(in crate::index) fn owner_statement<T>(
    tbl: pg_sys::Oid,
    sql: &str,
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> T {
    let owner = check_owner(tbl);
    as_owner(owner, || {
        Spi::connect_mut(|client| read(client.update(sql, None, &[])?)).unwrap_or_else(|e| {
            raise(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("index maintenance through SPI failed: {e}"),
                None,
            )
        })
    })
}
