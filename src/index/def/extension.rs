//! Which installation of the extension a running function belongs to. The user-facing objects
//! (the `minhash_indexes` catalog, the query functions, `minhash_flag_duplicate`) live in the
//! extension's schema; the internal functions (the sync and load triggers, helpers) in schema
//! `minhash_internal`. A trigger finds its catalog, and checks that other triggers are the
//! extension's own, through the extension its function is a member of (`pg_depend`), never
//! through a name a caller could shadow.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;
use crate::pg::names::quote_ident;

/// An installed pg_minhash: its `pg_extension` OID and the schema of its catalog.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::index) struct Extension {
    pub(super) oid: pg_sys::Oid,
    pub(super) schema: pg_sys::Oid,
}

thread_local! {
    /// Function OID -> its extension. Membership changes only with ALTER EXTENSION ... ADD or
    /// DROP, which only the extension's owner runs; a reinstalled extension has new function
    /// OIDs.
    static OF_FUNCTION: RefCell<HashMap<pg_sys::Oid, Extension>> = RefCell::new(HashMap::new());
    /// Function OID -> the extension it is a member of, if any (the triggers of a band table
    /// are checked at every write).
    static MEMBER_OF: RefCell<HashMap<pg_sys::Oid, Option<pg_sys::Oid>>> =
        RefCell::new(HashMap::new());
}

/// The extension that function `fn_oid` belongs to, or None.
fn extension_oid(fn_oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    if let Some(ext) = MEMBER_OF.with_borrow(|m| m.get(&fn_oid).copied()) {
        return ext;
    }
    // SAFETY: a pg_depend lookup by class and object OID; InvalidOid when there is none.
    let ext = unsafe { pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, fn_oid) };
    let ext = (ext != pg_sys::InvalidOid).then_some(ext);
    MEMBER_OF.with_borrow_mut(|m| m.insert(fn_oid, ext));
    ext
}

impl Extension {
    /// The extension whose member function `fn_oid` (a function running now) is; 39P01 if it
    /// is none's.
    pub(in crate::index) fn of_function(fn_oid: pg_sys::Oid) -> Extension {
        if let Some(ext) = OF_FUNCTION.with_borrow(|m| m.get(&fn_oid).copied()) {
            return ext;
        }
        let Some(oid) = extension_oid(fn_oid) else {
            raise(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "a pg_minhash function runs outside the extension",
                None,
            )
        };
        // (a read-only query: lookups run in parallel workers, which may not take an xid)
        let schema = Spi::connect(|client| {
            client
                .select(
                    "SELECT extnamespace FROM pg_catalog.pg_extension \
                     WHERE oid OPERATOR(pg_catalog.=) $1",
                    Some(1),
                    &[oid.into()],
                )?
                .first()
                .get_one::<pg_sys::Oid>()
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                "the pg_minhash extension is gone",
                None,
            )
        });
        let ext = Extension { oid, schema };
        OF_FUNCTION.with_borrow_mut(|m| m.insert(fn_oid, ext));
        ext
    }

    /// Whether function `fn_oid` is a member of this extension.
    pub(super) fn owns_function(self, fn_oid: pg_sys::Oid) -> bool {
        extension_oid(fn_oid) == Some(self.oid)
    }

    /// The catalog's schema name, quoted for SQL.
    pub(in crate::index) fn quoted_schema(self) -> String {
        // SAFETY: the schema of an installed extension exists; get_namespace_name returns a
        // palloc'd C string.
        quote_ident(unsafe { CStr::from_ptr(pg_sys::get_namespace_name(self.schema)) })
    }
}

/// Raises 55000 in a library entry point kept only so that an older release's install script
/// loads with this library (`ALTER EXTENSION pg_minhash UPDATE` then drops its function): a
/// catalog of that release that calls it is told to update.
pub(in crate::index) fn older_sql_objects() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_minhash's library is newer than its SQL objects in this database",
        Some("Run ALTER EXTENSION pg_minhash UPDATE.".into()),
    )
}
