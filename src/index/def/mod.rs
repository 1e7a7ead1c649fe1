//! What an index is: its row of the `minhash_indexes` catalog checked against PostgreSQL's
//! catalogs (`catalog`), its settings (`settings`), the ids of its table's rows (`row_id`), the
//! band rows of a text and their formats (`band`), where a row's text comes from
//! (`text_source`), the installation of the extension a function belongs to (`extension`), the
//! placement of a Citus table and its shards (`citus`), which triggers on a table are ours and
//! the load trigger that keeps an index exact through a restore (`restore`), and the arguments
//! of our triggers (`trigger`). It uses only `run`, never `read` or `write`.

pub(super) mod band;
pub(super) mod catalog;
pub(super) mod citus;
pub(super) mod extension;
pub(super) mod restore;
pub(super) mod row_id;
pub(super) mod settings;
pub(super) mod text_source;
pub(super) mod trigger;
