//! PostgreSQL plumbing shared by the SQL functions (`sql`) and the managed index (`index`):
//! errors, relation names and quoting, tuple access, typed ids, per-backend state.

pub mod backend;
pub mod compat;
pub mod error;
pub mod ids;
pub mod names;
pub mod tuple;
