//! What changes band tables: the sync trigger that keeps every band table exact (`sync`), the
//! duplicate trigger `minhash_flag_duplicate` (`flag`) and the band rows it claims before it
//! looks (`claim`), a firing of our triggers resolved once (`firing`), band-table writes
//! (`band_table`), the bulk write of a new band table (`fill`), the test hook that pauses a
//! sync between two writes (`pause`), and the internal SQL functions that index creation and
//! maintenance call (`internal`). It may use `read` (the duplicate check looks a row up), `def`
//! and `run`.

pub(super) mod band_table;
pub(super) mod claim;
pub(super) mod fill;
pub(super) mod firing;
pub(super) mod flag;
pub(super) mod internal;
pub(super) mod pause;
pub(super) mod sync;
