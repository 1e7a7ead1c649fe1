//! What fired a trigger of ours.

use pgrx::prelude::*;

/// The trigger's arguments as given to CREATE TRIGGER.
pub(in crate::index) fn trigger_args(trigger: &pg_sys::Trigger) -> Vec<String> {
    (0..trigger.tgnargs as usize)
        .map(|i| {
            // SAFETY: tgargs holds tgnargs C strings.
            unsafe { std::ffi::CStr::from_ptr(*trigger.tgargs.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// The name of the row trigger beside the sync triggers: `BEFORE UPDATE ... FOR EACH ROW`,
/// named to fire after every BEFORE trigger with an ASCII name, so that it sees the row as it
/// will be stored.
pub(super) const CLAIM_TRIGGER: &str = "~minhash_sync_claim";

/// How a trigger is named [`CLAIM_TRIGGER`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::index) enum ClaimName {
    /// Exactly.
    Table,
    /// As Citus names its copy on a shard: `<name>_<shard id>`.
    ShardCopy,
}

/// Whether trigger name `name` is that of the claim trigger, and how.
pub(in crate::index) fn claim_trigger_name(name: &[u8]) -> Option<ClaimName> {
    let rest = name.strip_prefix(CLAIM_TRIGGER.as_bytes())?;
    match rest.strip_prefix(b"_") {
        None if rest.is_empty() => Some(ClaimName::Table),
        Some(id) if !id.is_empty() && id.iter().all(u8::is_ascii_digit) => {
            Some(ClaimName::ShardCopy)
        }
        _ => None,
    }
}
