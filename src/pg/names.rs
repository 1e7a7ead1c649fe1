//! Relation names for messages and SQL, identifier quoting, and `regclass` arguments.

use std::ffi::{CStr, CString};

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::error::raise;

/// A `regclass` argument, taken as the table's OID without opening the table.
#[derive(Clone, Copy)]
pub(crate) struct Regclass(pub(crate) pg_sys::Oid);

impl FromDatum for Regclass {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        // SAFETY: a regclass datum is an OID datum.
        (!is_null)
            .then(|| Regclass(unsafe { pg_sys::Oid::from_datum(datum, false) }.expect("not NULL")))
    }
}

// SAFETY: a regclass argument is unboxed from its OID datum.
unsafe impl<'fcx> ArgAbi<'fcx> for Regclass {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: PostgreSQL passes a regclass datum, as the SQL signature says.
        unsafe { arg.unbox_arg_using_from_datum() }.expect("a non-NULL regclass")
    }
}

// SAFETY: the SQL type is regclass, an OID.
unsafe impl SqlTranslatable for Regclass {
    const TYPE_IDENT: &'static str = <pgrx::PgRelation as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <pgrx::PgRelation as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <pgrx::PgRelation as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        <pgrx::PgRelation as SqlTranslatable>::RETURN_SQL;
}

/// A table's name for messages: schema-qualified, quoted as needed, like the other functions'
/// messages print a regclass (they run with `search_path = pg_catalog`). `None` if the table no
/// longer exists.
pub(crate) fn qualified(rel: pg_sys::Oid) -> Option<String> {
    // SAFETY: both lookups return NULL (checked) or a palloc'd C string.
    unsafe {
        let name = pg_sys::get_rel_name(rel);
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(rel));
        (!name.is_null() && !schema.is_null()).then(|| {
            CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name))
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// [`qualified`], or the OID as a number (as `regclass` prints one) for a dropped table.
pub(crate) fn regclass_name(tbl: pg_sys::Oid) -> String {
    qualified(tbl).unwrap_or_else(|| tbl.to_u32().to_string())
}

/// [`qualified`] for a table a query reads; 42P01 if it no longer exists.
pub(crate) fn qualified_name(rel: pg_sys::Oid) -> String {
    qualified(rel).unwrap_or_else(|| {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("relation with OID {} does not exist", rel.to_u32()),
            Some(
                "The minhash index refers to a dropped table; drop it with minhash_index_drop()."
                    .into(),
            ),
        )
    })
}

/// `ident` quoted as an SQL identifier where it needs to be.
pub(crate) fn quote_ident(ident: &CStr) -> String {
    // SAFETY: quote_identifier returns its argument or a palloc'd quoted copy.
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(ident.as_ptr())) }
        .to_string_lossy()
        .into_owned()
}

/// [`quote_ident`] of a Rust string.
pub(crate) fn quote_ident_str(ident: &str) -> String {
    quote_ident(&CString::new(ident).expect("identifiers have no NUL"))
}

/// `text` as an SQL string literal, as `quote_literal` gives it.
pub(crate) fn quote_literal(text: &str) -> String {
    let escaped = text.replace('\'', "''");
    if text.contains('\\') {
        format!("E'{}'", escaped.replace('\\', "\\\\"))
    } else {
        format!("'{escaped}'")
    }
}

/// A relation's unqualified name, as PostgreSQL's constraint messages give it.
pub(crate) fn relation_name(rel: pg_sys::Oid) -> String {
    // SAFETY: NULL (checked) or a palloc'd C string.
    unsafe {
        let name = pg_sys::get_rel_name(rel);
        if name.is_null() {
            return rel.to_u32().to_string();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// A type's name as SQL spells it.
pub fn type_name(typ: pg_sys::Oid) -> String {
    // SAFETY: format_type_be takes any type OID and returns a palloc'd C string.
    unsafe { CStr::from_ptr(pg_sys::format_type_be(typ)) }
        .to_string_lossy()
        .into_owned()
}

/// A type's schema-qualified name, as SQL writes it.
pub fn qualified_type_name(typid: pgrx::PgOid) -> String {
    // SAFETY: format_type_be_qualified takes any OID and returns a palloc'd C string.
    unsafe { CStr::from_ptr(pg_sys::format_type_be_qualified(typid.value())) }
        .to_string_lossy()
        .into_owned()
}

/// `OPERATOR(schema.=)`: the equality operator of `typ`'s default B-tree operator class,
/// schema-qualified (`citext`'s is in the schema of citext), or `OPERATOR(pg_catalog.=)` for a
/// type with none.
pub fn equality_operator(typ: pg_sys::Oid) -> String {
    // SAFETY: the type cache takes any type OID; the operator's namespace is read from its
    // catalog row by OID and the name returned palloc'd (NULL if it is gone).
    let schema = unsafe {
        let cache = pg_sys::lookup_type_cache(typ, pg_sys::TYPECACHE_EQ_OPR as i32);
        let op = if cache.is_null() {
            pg_sys::InvalidOid
        } else {
            (*cache).eq_opr
        };
        let namespace = if op == pg_sys::InvalidOid {
            std::ptr::null_mut()
        } else {
            let namespace = operator_namespace(op);
            if namespace == pg_sys::InvalidOid {
                std::ptr::null_mut()
            } else {
                pg_sys::get_namespace_name(namespace)
            }
        };
        if namespace.is_null() {
            "pg_catalog".to_owned()
        } else {
            CStr::from_ptr(namespace).to_string_lossy().into_owned()
        }
    };
    format!("OPERATOR({}.=)", quote_ident_str(&schema))
}

/// The schema of operator `op` (InvalidOid if it is gone).
///
/// # Safety
/// Within a transaction (a syscache lookup).
unsafe fn operator_namespace(op: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::OPEROID as std::ffi::c_int,
            pg_sys::Datum::from(op),
        );
        if tuple.is_null() {
            return pg_sys::InvalidOid;
        }
        let form = pg_sys::GETSTRUCT(tuple).cast::<pg_sys::FormData_pg_operator>();
        let namespace = (*form).oprnamespace;
        pg_sys::ReleaseSysCache(tuple);
        namespace
    }
}
