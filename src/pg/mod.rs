//! PostgreSQL plumbing shared by the SQL functions (`sql`), the managed index (`index`) and the
//! sketch store (`am`): errors, relation names and quoting, tuple access, typed ids, per-backend
//! state, version gates.

pub mod backend;
pub mod compat;
pub mod error;
pub mod ids;
pub mod names;
pub mod tuple;
