//! What reads an index: the entry points `minhash_similar`, `minhash_matches` and
//! `minhash_explain` (`similar`), the lookup of one text behind them and the duplicate check
//! (`lookup`), an index as lookups, checks and syncs reach it, cached per backend
//! (`access_plan`), direct B-tree reads of band rows and texts (`btree`), the table's sketch
//! store (`sketch_store`), the whole-table searches behind `minhash_duplicates` and
//! `minhash_clusters` (`whole_table`), and a row's text for SQL that runs with the caller's
//! rights (`row_text`). It uses `def` and `run`, never `write`.

pub(super) mod access_plan;
pub(super) mod btree;
pub(super) mod lookup;
pub(super) mod row_text;
pub(super) mod similar;
pub(super) mod sketch_store;
pub(super) mod whole_table;
