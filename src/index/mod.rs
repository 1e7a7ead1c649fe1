//! The managed band-key index: the catalog, band tables and query functions are hand-written
//! SQL in `src/index/sql/` (one file per concern); this module adds the Rust pieces they call,
//! among them the one trigger function that keeps every band table exact (`write::sync`).
//!
//! The code is kept in five rooms, each a folder; a room uses only the rooms below it (and
//! `pg`, `core`, `am`), never one above, and no module uses another in a cycle
//! (`scripts/layers.py` checks both in CI, with the order of the rooms written there):
//!
//! - `manage`: what users call to manage an index: `minhash_index_create` (`create`), and the
//!   maintenance functions of an index that exists: `minhash_index_check` (`check`),
//!   `minhash_index_stats` (`stats`), `minhash_index_rebuild` (`rebuild`) and
//!   `minhash_index_drop` (`drop`), and the internal functions they share with the event
//!   triggers: an index's catalog row, the backfill and the sync triggers (`build`), a band
//!   table's format, columns, B-trees and Citus placement (`layout`). It may use every other room.
//! - `write`: what changes band tables: the sync trigger (`sync`), the duplicate trigger
//!   (`flag`) with its claims (`claim`), a trigger firing resolved once (`firing`), band-table
//!   writes (`band_table`), the sync pause test hook (`pause`), and the internal SQL functions
//!   that index creation and maintenance call (`internal`). It may use `read`, `def` and `run`.
//! - `read`: what reads an index: `minhash_similar`, `minhash_matches` and `minhash_explain`
//!   (`similar`), the lookup of one text (`lookup`), an index as lookups reach it (`access_plan`),
//!   direct B-tree reads (`btree`), the sketch store (`sketch_store`), whole-table searches
//!   (`whole_table`), a row's text for SQL (`row_text`). It may use `def` and `run`.
//! - `def`: what an index is: its catalog row (`catalog`), settings (`settings`), row ids
//!   (`row_id`), band rows and formats (`band`), where a row's text comes from (`text_source`),
//!   the extension a function belongs to (`extension`), Citus placement (`citus`), which
//!   triggers are ours and the restore load trigger (`restore`), trigger arguments (`trigger`).
//!   It may use `run`.
//! - `run`: how the index runs SQL: as the table's owner (`owner`), prepared statements
//!   (`prepared`), reading SPI results (`spi`), progress NOTICEs (`progress`), rows passed to and
//!   returned by internal functions (`row`). It uses no room.

use pgrx::prelude::*;

// the rooms (their order is in scripts/layers.py: manage, write, read, def, run)
mod def;
mod manage;
mod read;
mod run;
mod write;

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
    write::pause::define_setting();
    write::claim::hook_query_ends();
}

/// The schema of the extension's internal functions (see src/index/sql/catalog.sql).
#[pg_schema]
mod minhash_internal {}

// The SQL of the managed index, in files per concern, in this order: the first after the Rust
// functions that SQL-language functions of theirs call (PostgreSQL checks such a body when it is
// created: build.sql's _minhash_text_sql calls _minhash_row_text_sql, its _minhash_tenant_column
// _minhash_citus_table), the last after everything else.
pgrx::extension_sql_file!(
    "sql/catalog.sql",
    name = "index_catalog",
    requires = [read::row_text::_minhash_row_text_sql]
);
pgrx::extension_sql_file!(
    "sql/build.sql",
    name = "index_build",
    requires = ["index_catalog", def::citus::_minhash_citus_table]
);
pgrx::extension_sql_file!(
    "sql/ddl.sql",
    name = "index_ddl",
    requires = ["index_build"]
);
pgrx::extension_sql_file!("sql/search.sql", name = "index_search", finalize);
