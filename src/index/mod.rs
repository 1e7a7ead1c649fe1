//! The managed band-key index: the catalog, band tables and query functions are hand-written
//! SQL in `sql/index/` (one file per concern); this module adds the Rust pieces they call,
//! among them the one trigger function that keeps every band table exact (`sync`).
//!
//! The modules form layers: each uses only modules of its own layer or the layers below it (and
//! `pg`, `core`), never one above, and no module uses another in a cycle (`scripts/layers.py`
//! checks both in CI, reading the numbered comments of the module list below):
//!
//! 1. Entry points, the SQL and trigger functions: `sync` (the sync and claim triggers), `flag`
//!    (the duplicate check), `similar` (lookups, `minhash_explain`), `search` (whole-table
//!    searches), `row_text` (a row's text for the PL/pgSQL), `internal` (band rows and
//!    thresholds for the PL/pgSQL), `progress`.
//! 2. Access paths: `firing` (a trigger firing resolved once), `lookup` (the lookup of one
//!    text), `write` (band-table writes and claims), `access` (an index with its placement and
//!    lookup SQL, cached per backend), `scan` (direct index reads of band rows and texts),
//!    `store` (the table's sketch store, swept by lookups that must consider every row),
//!    `claim` (the backend's claimed band rows).
//! 3. The catalog: `catalog` (an index's row, checked against PostgreSQL's catalogs).
//! 4. Runtime helpers: `citus` (shards and Citus tables), `restore` (our triggers, the load
//!    trigger), `text` (where a row's text comes from), `owner` (running as the owner,
//!    restricted), `trigger` (trigger arguments, the claim trigger's name), `prepared` (kept
//!    statements), `spi`, `extension`, `pause` (the test hook that stops a sync between two
//!    writes).
//! 5. Plain model types: `key` (ids as the band table stores them), `band` (a text's band
//!    rows), `params` (an index's checked settings).

use pgrx::prelude::*;

// 1. entry points
mod flag;
mod internal;
mod progress;
mod row_text;
mod search;
mod similar;
mod sync;
// 2. access paths
mod access;
mod claim;
mod firing;
mod lookup;
mod scan;
mod store;
mod write;
// 3. the catalog
mod catalog;
// 4. runtime helpers
mod citus;
mod extension;
mod owner;
mod pause;
mod prepared;
mod restore;
mod spi;
mod text;
mod trigger;
// 5. plain model types
mod band;
mod key;
mod params;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

// First of the install script: a schema minhash_internal that is not the extension's (made
// beforehand by any role with CREATE on the database) stops the install with its owner's name
// and the fix, rather than PostgreSQL's "is not a member of extension" (docs/security.md).
pgrx::extension_sql!(
    r#"
DO $squatted$
DECLARE
    squatter name := (SELECT r.rolname FROM pg_catalog.pg_namespace n
                      JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                      WHERE n.nspname OPERATOR(pg_catalog.=) 'minhash_internal');
BEGIN
    IF squatter IS NOT NULL THEN
        RAISE EXCEPTION 'schema "minhash_internal" already exists and belongs to role "%"', squatter
            USING ERRCODE = 'duplicate_schema',
                  DETAIL = 'pg_minhash keeps its internal functions in a schema of that name, made by CREATE EXTENSION.',
                  HINT = 'As that role or a superuser, DROP SCHEMA minhash_internal (or rename it), then run CREATE EXTENSION pg_minhash again.';
    END IF;
END $squatted$;
"#,
    name = "squatted_internal_schema",
    bootstrap
);

/// Defines the settings of the managed index (from `_PG_init`).
/// What `_PG_init` sets up: the settings, and the end of a query's claims.
pub(crate) fn init() {
    pause::define_setting();
    claim::hook_query_ends();
}

/// The schema of the extension's internal functions (see sql/index/catalog.sql).
#[pg_schema]
mod minhash_internal {}

// The SQL of the managed index, in files per concern, in this order: the first after the one Rust
// function that an SQL-language function of theirs calls (build.sql's _minhash_text_sql, whose
// body PostgreSQL checks when it is created), the last after everything else.
pgrx::extension_sql_file!(
    "../../sql/index/catalog.sql",
    name = "index_catalog",
    requires = [row_text::_minhash_row_text_sql]
);
pgrx::extension_sql_file!(
    "../../sql/index/build.sql",
    name = "index_build",
    requires = ["index_catalog"]
);
pgrx::extension_sql_file!(
    "../../sql/index/create_drop.sql",
    name = "index_create_drop",
    requires = ["index_build"]
);
pgrx::extension_sql_file!(
    "../../sql/index/ddl.sql",
    name = "index_ddl",
    requires = ["index_create_drop"]
);
pgrx::extension_sql_file!(
    "../../sql/index/maintenance.sql",
    name = "index_maintenance",
    requires = ["index_ddl"]
);
pgrx::extension_sql_file!(
    "../../sql/index/search.sql",
    name = "index_search",
    finalize
);
