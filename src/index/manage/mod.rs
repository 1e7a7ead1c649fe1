//! What users call to manage an index: `minhash_index_create` (`create`). It may use `write`,
//! `read`, `def` and `run`.

mod create;
