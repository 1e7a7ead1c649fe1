//! The text of a row, as an index reads it: one column (`text_column`), or an SQL expression
//! over the row's columns (`text_expression`).
//!
//! An expression is kept in the catalog as text, in the form PostgreSQL prints it back with
//! the search path set to `pg_catalog, pg_temp`: every function, operator and type outside
//! `pg_catalog` is schema-qualified, columns are named bare. It is parsed, planned and run
//! only as the table's owner inside a security-restricted operation with that search path
//! (`owner::as_owner`), whoever writes or reads the table: the names in it mean what they
//! meant when the index was made, and the owner's code never runs with another role's
//! rights. It must be IMMUTABLE and may use only the row's own columns: no subqueries,
//! aggregates, window or set-returning functions (the checks of an index expression), system
//! columns or whole-row references.
//!
//! SQL that runs as the owner (backfill, check) computes it inline over the bare column names,
//! SQL that runs as the caller through `_minhash_row_text` (`row_text`) (both made by `_minhash_text_sql`
//! in `src/index/sql/build.sql`, and [`TextSource::caller_sql`]), Rust over a tuple slot of the table
//! ([`TextReader`]).

use std::ffi::{c_int, CStr, CString};

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use pgrx::{is_a, PgList};

use crate::pg::compat;
use crate::pg::error::raise;
use crate::pg::names::{quote_ident_str, regclass_name, Regclass};
use crate::pg::tuple::{column, varlena_bytes};

use crate::index::run::owner::{as_owner, relation_owner};

/// The hint of an error about a column an index reads.
pub(in crate::index) const COLUMNS_HINT: &str =
    "A column of the minhash index was dropped or renamed; drop the index with minhash_index_drop().";

/// Where an index reads the text of a row.
pub(in crate::index) enum TextSource {
    Column(String),
    Expression(Expression),
}

/// A text expression as the catalog keeps it, analyzed against the table.
pub(in crate::index) struct Expression {
    /// The catalog's text of the expression.
    pub(super) text: String,
    /// The indexed table it was analyzed against.
    table: pg_sys::Oid,
    /// The planned expression tree (`nodeToString`), whose columns are the table's attribute
    /// numbers at the time the catalog row was read.
    plan: CString,
    /// The columns it reads, in the order of their attribute numbers.
    pub(super) columns: Vec<String>,
    /// Their attribute numbers.
    pub(in crate::index) attnos: Vec<i16>,
}

impl TextSource {
    /// The source of an index with text column `column` or text expression `expression` (one
    /// of the two), analyzed against `tbl`.
    pub(super) fn new(
        tbl: pg_sys::Oid,
        column: Option<String>,
        expression: Option<String>,
    ) -> Self {
        match (column, expression) {
            (_, Some(text)) => TextSource::Expression(analyze(tbl, &text)),
            (Some(column), None) => TextSource::Column(column),
            (None, None) => unreachable!("the catalog's CHECK keeps one of the two"),
        }
    }

    /// The text of the row `alias` of the table of the index with band table `band` in SQL
    /// that runs with the caller's rights: the column, or the expression computed by
    /// `_minhash_row_text` (`row_text`) (as the table's owner).
    pub(in crate::index) fn caller_sql(&self, band: pg_sys::Oid, alias: &str) -> String {
        match self {
            TextSource::Column(name) => format!("{alias}.{}", quote_ident_str(name)),
            TextSource::Expression(e) => format!(
                "minhash_internal._minhash_row_text({}::pg_catalog.oid::pg_catalog.regclass, \
                 ROW({}))",
                band.to_u32(),
                e.columns
                    .iter()
                    .map(|c| format!("{alias}.{}", quote_ident_str(c)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The columns the text is read from.
    pub(in crate::index) fn columns(&self) -> Vec<&str> {
        match self {
            TextSource::Column(name) => vec![name.as_str()],
            TextSource::Expression(e) => e.columns.iter().map(String::as_str).collect(),
        }
    }

    /// Runs `f`, which reads texts of rows of the table owned by `owner`: an expression, the
    /// owner's code, only ever runs as the owner inside a security-restricted operation (see
    /// `owner`), whoever reads the table.
    pub(in crate::index) fn evaluating<T>(&self, owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
        match self {
            TextSource::Column(_) => f(),
            TextSource::Expression(_) => as_owner(owner, f),
        }
    }

    /// A reader of the text of rows of the relation `tbl` with descriptor `tupdesc` (42703 if
    /// the column is gone): the indexed table, or one of its partitions, whose columns may
    /// have other attribute numbers (a column is found by name, an expression's columns are
    /// mapped by name, as PostgreSQL maps a partitioned index's expressions).
    ///
    /// # Safety
    /// `tupdesc` is the current descriptor of `tbl` and outlives the reader; `tbl` and the
    /// indexed table are locked.
    pub(in crate::index) unsafe fn reader(
        &self,
        tbl: pg_sys::Oid,
        tupdesc: pg_sys::TupleDesc,
    ) -> TextReader {
        match self {
            TextSource::Column(name) => {
                let (attno, typid, _) = column(tupdesc, tbl, name, COLUMNS_HINT);
                // (the catalog names the column; its type comes from the descriptor, and only
                // a text type is read as text)
                if typid != pg_sys::TEXTOID && typid != pg_sys::VARCHAROID {
                    raise(
                        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                        format!(
                            "text column \"{name}\" of {} is not of type text or character varying",
                            regclass_name(tbl)
                        ),
                        Some(COLUMNS_HINT.into()),
                    );
                }
                TextReader {
                    attno: attno as c_int,
                    state: std::ptr::null_mut(),
                    econtext: std::ptr::null_mut(),
                    slot: std::ptr::null_mut(),
                    tupdesc,
                }
            }
            // SAFETY: the plan was made from a tree of the indexed table's columns, mapped to a
            // partition's by name (both relations are locked, per the contract); the state and
            // context are made in the current memory context and freed by `drop`.
            TextSource::Expression(e) => unsafe {
                let mut expr = pg_sys::stringToNode(e.plan.as_ptr()).cast::<pg_sys::Expr>();
                if tbl != e.table {
                    // (as map_partition_varattnos: the root's attribute numbers to the
                    // partition's, matched by name)
                    let root = pg_sys::relation_open(e.table, pg_sys::NoLock as c_int);
                    let map = compat::attr_map_by_name(tupdesc, (*root).rd_att);
                    let mut whole_row = false;
                    expr = pg_sys::map_variable_attnos(
                        expr.cast(),
                        1,
                        0,
                        map,
                        pg_sys::InvalidOid,
                        &mut whole_row,
                    )
                    .cast();
                    pg_sys::relation_close(root, pg_sys::NoLock as c_int);
                }
                TextReader {
                    attno: 0,
                    state: pg_sys::ExecInitExpr(expr, std::ptr::null_mut()),
                    econtext: pg_sys::CreateStandaloneExprContext(),
                    slot: pg_sys::MakeSingleTupleTableSlot(tupdesc, &pg_sys::TTSOpsHeapTuple),
                    tupdesc,
                }
            },
        }
    }
}

/// Reads the text of rows of one relation: a column's value or an expression's result.
pub(in crate::index) struct TextReader {
    /// The text column's attribute number; 0 for an expression.
    attno: c_int,
    state: *mut pg_sys::ExprState,
    econtext: *mut pg_sys::ExprContext,
    /// A slot for the heap tuples an expression reads (see [`TextReader::tuple_text`]).
    slot: *mut pg_sys::TupleTableSlot,
    tupdesc: pg_sys::TupleDesc,
}

impl TextReader {
    /// The text of the row in `slot`, detoasted or computed in the current memory context;
    /// None for NULL.
    ///
    /// # Safety
    /// `slot` holds a row of the reader's relation; the bytes live as long as the row and the
    /// current memory context.
    pub(in crate::index) unsafe fn slot_text<'a>(
        &self,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> Option<&'a [u8]> {
        let mut is_null = false;
        // SAFETY: per the contract; text and varchar share one representation (the
        // expression's type was checked to be one of them). The expression is evaluated as
        // ExecEvalExpr does, allocating in the current memory context.
        unsafe {
            let datum = if self.state.is_null() {
                pg_sys::slot_getattr(slot, self.attno, &mut is_null)
            } else {
                (*self.econtext).ecxt_scantuple = slot;
                let eval = (*self.state).evalfunc.expect("an initialized expression");
                eval(self.state, self.econtext, &mut is_null)
            };
            (!is_null).then(|| varlena_bytes(datum))
        }
    }

    /// [`TextReader::slot_text`] of a heap tuple (not kept: it is stored in the reader's slot
    /// only while it is read).
    ///
    /// # Safety
    /// `tuple` is a row of the reader's relation, described by its descriptor.
    pub(in crate::index) unsafe fn tuple_text<'a>(
        &self,
        tuple: *mut pg_sys::HeapTupleData,
    ) -> Option<&'a [u8]> {
        // SAFETY: per the contract; the slot is made for the reader's descriptor and only
        // borrows the tuple.
        unsafe {
            if self.state.is_null() {
                let mut is_null = false;
                let datum = pg_sys::heap_getattr(tuple, self.attno, self.tupdesc, &mut is_null);
                return (!is_null).then(|| varlena_bytes(datum));
            }
            pg_sys::ExecStoreHeapTuple(tuple, self.slot, false);
            let text = self.slot_text(self.slot);
            text
        }
    }
}

impl Drop for TextReader {
    fn drop(&mut self) {
        // SAFETY: made by `reader` and `tuple_text`, freed once. (On an error the memory
        // context they live in is freed instead.)
        unsafe {
            if !self.slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            }
            if !self.econtext.is_null() {
                pg_sys::FreeExprContext(self.econtext, true);
            }
        }
    }
}

/// Internal to `minhash_index_create` and the DDL event trigger: `expression` checked as the
/// text expression of a minhash index on `tbl`, in the form the catalog keeps it (see the
/// module documentation). Errors: 42601 for what is not one expression, 42703 for an unknown
/// column, 42883 for an unknown function, 42804 for a result that is not text or varchar,
/// 42P17 for one that is not IMMUTABLE, 0A000 for system columns and whole-row references,
/// and the errors of an index expression for subqueries, aggregates, window and set-returning
/// functions.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
pub(in crate::index) fn _minhash_text_expression(tbl: Regclass, expression: &str) -> String {
    analyze(tbl.0, expression).text
}

/// Parses and checks `text` as an expression over the columns of `tbl` (see
/// [`_minhash_text_expression`]).
fn analyze(tbl: pg_sys::Oid, text: &str) -> Expression {
    // (planning may run the expression's functions on constants, as the table's owner as
    // CREATE INDEX does)
    as_owner(relation_owner(tbl), || {
        // SAFETY: parse analysis of one expression against an existing, locked relation, as
        // CREATE INDEX does for an index expression; all allocations in the current memory
        // context.
        unsafe {
            let raw = raw_expression(text);
            let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
            let source = CString::new(text).unwrap_or_else(|_| not_one_expression());
            (*pstate).p_sourcetext = source.as_ptr();
            let rel = pg_sys::relation_open(tbl, pg_sys::AccessShareLock as c_int);
            let item = pg_sys::addRangeTableEntryForRelation(
                pstate,
                rel,
                pg_sys::AccessShareLock as c_int,
                std::ptr::null_mut(),
                false,
                true,
            );
            pg_sys::addNSItemToQuery(pstate, item, false, true, true);
            let expr = pg_sys::transformExpr(
                pstate,
                raw,
                pg_sys::ParseExprKind::EXPR_KIND_INDEX_EXPRESSION,
            );
            pg_sys::assign_expr_collations(pstate, expr);
            let typ = pg_sys::exprType(expr);
            if typ != pg_sys::TEXTOID && typ != pg_sys::VARCHAROID {
                let name = CStr::from_ptr(pg_sys::format_type_be(typ)).to_string_lossy();
                raise(
                    PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                    format!("text expression is of type {name}, not text or character varying"),
                    Some("Cast it: text_expression => '(...)::text'.".into()),
                );
            }
            let (columns, attnos) = referenced_columns(rel, expr);
            // (as declared, and after planning has inlined SQL functions)
            let plan = pg_sys::expression_planner(pg_sys::copyObjectImpl(expr.cast()).cast())
                .cast::<pg_sys::Node>();
            if pg_sys::contain_mutable_functions(expr) || pg_sys::contain_mutable_functions(plan) {
                raise(
                    PgSqlErrorCode::ERRCODE_INVALID_OBJECT_DEFINITION,
                    "functions in a minhash text expression must be marked IMMUTABLE",
                    None,
                );
            }
            let relname = (*(*rel).rd_rel).relname.data.as_ptr();
            let context = pg_sys::deparse_context_for(relname, tbl);
            let deparsed = pg_sys::deparse_expression(expr, context, false, false);
            pg_sys::relation_close(rel, pg_sys::NoLock as c_int);
            pg_sys::free_parsestate(pstate);
            Expression {
                text: CStr::from_ptr(deparsed).to_string_lossy().into_owned(),
                table: tbl,
                plan: CStr::from_ptr(pg_sys::nodeToString(plan.cast())).to_owned(),
                columns,
                attnos,
            }
        }
    })
}

fn not_one_expression() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_SYNTAX_ERROR,
        "text expression must be one SQL expression over the table's columns",
        Some("For example: text_expression => 'title || '' '' || body'.".into()),
    )
}

/// The raw parse tree of `text` as one expression: the only target of `SELECT (text)`, with no
/// other clause (a text that closes the parenthesis to add one is refused).
///
/// # Safety
/// Inside a transaction; the tree is allocated in the current memory context.
unsafe fn raw_expression(text: &str) -> *mut pg_sys::Node {
    // (line breaks end a comment the text may end with)
    let query =
        CString::new(format!("SELECT (\n{text}\n)")).unwrap_or_else(|_| not_one_expression());
    // SAFETY: the grammar's parse of a C string; the nodes are read by their tags.
    unsafe {
        let statements = PgList::<pg_sys::RawStmt>::from_pg(pg_sys::raw_parser(
            query.as_ptr(),
            pg_sys::RawParseMode::RAW_PARSE_DEFAULT,
        ));
        let statement = match statements.len() {
            1 => (*statements.get_ptr(0).expect("one statement")).stmt,
            _ => not_one_expression(),
        };
        if !is_a(statement, pg_sys::NodeTag::T_SelectStmt) {
            not_one_expression();
        }
        let select = &*statement.cast::<pg_sys::SelectStmt>();
        let plain = select.distinctClause.is_null()
            && select.intoClause.is_null()
            && select.fromClause.is_null()
            && select.whereClause.is_null()
            && select.groupClause.is_null()
            && select.havingClause.is_null()
            && select.windowClause.is_null()
            && select.valuesLists.is_null()
            && select.sortClause.is_null()
            && select.limitOffset.is_null()
            && select.limitCount.is_null()
            && select.lockingClause.is_null()
            && select.withClause.is_null()
            && select.op == pg_sys::SetOperation::SETOP_NONE;
        let targets = PgList::<pg_sys::ResTarget>::from_pg(select.targetList);
        if !plain || targets.len() != 1 {
            not_one_expression();
        }
        let target = &*targets.get_ptr(0).expect("one target");
        if !target.name.is_null() {
            not_one_expression();
        }
        target.val
    }
}

/// The names and attribute numbers of the columns of `rel` that `expr` reads, in attribute
/// order; 0A000 for a system column or a
/// whole-row reference (a row's text is made of its user columns), and for a virtual
/// generated column (which has no value in the rows triggers see).
///
/// # Safety
/// `expr` was analyzed with `rel` as its only relation; `rel` is open.
unsafe fn referenced_columns(
    rel: pg_sys::Relation,
    expr: *mut pg_sys::Node,
) -> (Vec<String>, Vec<i16>) {
    let refuse = |what: &str| -> ! {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("a minhash text expression cannot use {what}"),
            Some("Use the table's own columns by name.".into()),
        )
    };
    let mut set: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    let (mut columns, mut attnos) = (Vec::new(), Vec::new());
    // SAFETY: per the contract; the set's members are attribute numbers offset by
    // FirstLowInvalidHeapAttributeNumber.
    unsafe {
        pg_sys::pull_varattnos(expr, 1, &mut set);
        let mut member = -1;
        loop {
            member = pg_sys::bms_next_member(set, member);
            if member < 0 {
                break;
            }
            let attno = member + pg_sys::FirstLowInvalidHeapAttributeNumber;
            match attno {
                0 => refuse("a whole-row reference"),
                a if a < 0 => refuse("system columns"),
                _ => {}
            }
            let attribute = &crate::pg::compat::attributes((*rel).rd_att)[attno as usize - 1];
            if attribute.attgenerated == b'v' as std::ffi::c_char {
                refuse("virtual generated columns");
            }
            columns.push(pgrx::name_data_to_str(&attribute.attname).to_owned());
            attnos.push(attno as i16);
        }
    }
    (columns, attnos)
}

/// The bytes of a row's text as a string: text in a UTF-8 database (`minhash_index_create`
/// refuses others) is valid UTF-8; 22021 if it is not.
pub(in crate::index) fn utf8(text: &[u8]) -> &str {
    std::str::from_utf8(text).unwrap_or_else(|_| {
        raise(
            PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
            "text of an indexed row is not valid UTF-8",
            None,
        )
    })
}
