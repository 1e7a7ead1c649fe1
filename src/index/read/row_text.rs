//! A row's text for SQL that runs with the caller's rights: `_minhash_row_text` evaluates an
//! index's text expression over the columns the caller passes, as the table's owner, and
//! `_minhash_row_text_sql` writes the SQL that calls it (see `text_source`).

use std::ffi::c_int;
use std::mem::ManuallyDrop;

use pgrx::prelude::*;
use pgrx::{AnyElement, PgMemoryContexts, PgSqlErrorCode};

use crate::pg::error::raise;
use crate::pg::names::{regclass_name, Regclass};

use super::access_plan::Index;
use crate::index::def::text_source::{utf8, TextReader, TextSource};
use crate::index::run::owner::{as_owner, relation_owner};

/// What [`_minhash_row_text`] keeps per call site (in `fn_extra`), made on its first call.
struct RowText {
    /// Lives in the call site's memory context, freed with it (not dropped: the context's
    /// children, among them the expression context's, are gone by then).
    reader: ManuallyDrop<TextReader>,
    owner: pg_sys::Oid,
    /// The table's descriptor and the attribute numbers of the expression's columns.
    tupdesc: pg_sys::TupleDesc,
    attnos: Vec<i16>,
    /// The descriptor of the records passed in, checked against those columns, and its typmod.
    record: Option<(i32, pg_sys::TupleDesc)>,
    /// The call site's memory context.
    memory: pg_sys::MemoryContext,
}

/// Internal to the searches whose SQL runs with the caller's rights (a lookup that cannot read
/// the table directly, `minhash_duplicates`, `minhash_clusters`): the text of a row of the
/// table of the index with band table `band` under the index's text expression, from `columns`, a record of the columns the expression
/// reads (`ROW(t.a, t.b)`, as [`TextSource::caller_sql`] writes it: a caller with SELECT on
/// those columns alone may read them, unlike the whole row). The expression runs as the
/// table's owner inside a security-restricted operation (see [`TextSource::evaluating`]), never
/// as the caller, who must be allowed to read the columns it uses (42501), as for a lookup.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
fn _minhash_row_text(
    band: Regclass,
    columns: Option<AnyElement>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<String> {
    // SAFETY: this call's fcinfo; the cache is made once per call site in its memory context
    // and read back from fn_extra as the type stored there.
    let cache = unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            let fn_oid = (*flinfo).fn_oid;
            let cfg = Spi::connect(|client| Index::get(client, fn_oid, band.0));
            let tbl = cfg.def.tbl;
            cfg.def.check_readable();
            let TextSource::Expression(expression) = &cfg.def.text else {
                raise(
                    PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                    format!(
                        "the minhash index of {} has no text expression",
                        regclass_name(tbl)
                    ),
                    None,
                );
            };
            let mut memory = PgMemoryContexts::For((*flinfo).fn_mcxt);
            let cache = memory.switch_to(|_| {
                let rel = pg_sys::relation_open(tbl, pg_sys::AccessShareLock as c_int);
                let tupdesc = pg_sys::CreateTupleDescCopy((*rel).rd_att);
                pg_sys::relation_close(rel, pg_sys::NoLock as c_int);
                RowText {
                    reader: ManuallyDrop::new(cfg.def.text.reader(tbl, tupdesc)),
                    owner: relation_owner(tbl),
                    tupdesc,
                    attnos: expression.attnos.clone(),
                    record: None,
                    memory: (*flinfo).fn_mcxt,
                }
            });
            (*flinfo).fn_extra = memory.leak_and_drop_on_delete(cache).cast();
        }
        &mut *(*flinfo).fn_extra.cast::<RowText>()
    };
    let columns = columns?.datum();
    // SAFETY: a composite datum (checked against the columns by `row`); the tuple made from it
    // is read while it lives.
    unsafe {
        let mut tuple = cache.row(columns);
        cache.text_as_owner(&mut tuple)
    }
}

impl RowText {
    /// A row of the table with the values of `columns` in the expression's columns (and NULL
    /// in the others, which it does not read); 42804 unless `columns` is a record of exactly
    /// those columns' types.
    ///
    /// # Safety
    /// `columns` is a composite datum.
    unsafe fn row(&mut self, columns: pg_sys::Datum) -> pg_sys::HeapTupleData {
        // SAFETY: per the contract; descriptors are looked up by the record's own type and
        // typmod, copied into the call site's context (the cache's), and match the values.
        unsafe {
            let header = pg_sys::pg_detoast_datum(columns.cast_mut_ptr())
                .cast::<pg_sys::HeapTupleHeaderData>();
            let typid = (*header).t_choice.t_datum.datum_typeid;
            let typmod = (*header).t_choice.t_datum.datum_typmod;
            let record = match self.record {
                Some((cached, desc)) if cached == typmod && typid == pg_sys::RECORDOID => desc,
                _ => {
                    let desc = PgMemoryContexts::For(self.memory)
                        .switch_to(|_| pg_sys::lookup_rowtype_tupdesc_copy(typid, typmod));
                    let table = crate::pg::compat::attributes(self.tupdesc);
                    let fields = crate::pg::compat::attributes(desc);
                    let fits = fields.len() == self.attnos.len()
                        && fields
                            .iter()
                            .zip(&self.attnos)
                            .all(|(f, &a)| f.atttypid == table[a as usize - 1].atttypid);
                    if !fits {
                        raise(
                            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                            "columns must be a record of the columns the text expression reads",
                            None,
                        );
                    }
                    self.record = Some((typmod, desc));
                    desc
                }
            };
            let mut source = pg_sys::HeapTupleData {
                t_len: pgrx::varlena::varsize_any(header.cast()) as u32,
                t_self: pg_sys::ItemPointerData::default(),
                t_tableOid: pg_sys::InvalidOid,
                t_data: header,
            };
            let n = self.attnos.len();
            let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); n], vec![false; n]);
            pg_sys::heap_deform_tuple(&mut source, record, values.as_mut_ptr(), nulls.as_mut_ptr());
            let natts = (*self.tupdesc).natts as usize;
            let (mut row_values, mut row_nulls) =
                (vec![pg_sys::Datum::from(0); natts], vec![true; natts]);
            for (i, &attno) in self.attnos.iter().enumerate() {
                row_values[attno as usize - 1] = values[i];
                row_nulls[attno as usize - 1] = nulls[i];
            }
            *pg_sys::heap_form_tuple(
                self.tupdesc,
                row_values.as_mut_ptr(),
                row_nulls.as_mut_ptr(),
            )
        }
    }

    /// The text of `tuple`, read as the table's owner.
    ///
    /// # Safety
    /// `tuple` is a row of the table, described by the reader's descriptor.
    unsafe fn text_as_owner(&self, tuple: &mut pg_sys::HeapTupleData) -> Option<String> {
        // SAFETY: per the contract.
        as_owner(self.owner, || unsafe {
            self.reader
                .tuple_text(tuple)
                .map(|text| utf8(text).to_owned())
        })
    }
}

/// Internal to `_minhash_text_sql`: the text of the row `alias` of the table of the index with
/// band table `band` in SQL that runs with the caller's rights (see
/// [`TextSource::caller_sql`]).
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_row_text_sql(band: Regclass, alias: &str, fcinfo: pg_sys::FunctionCallInfo) -> String {
    // SAFETY: this call's fcinfo.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let cfg = Spi::connect(|client| Index::get(client, fn_oid, band.0));
    cfg.def.text.caller_sql(cfg.def.band_table, alias)
}
