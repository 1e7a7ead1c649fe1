//! What fired a trigger of ours.

use pgrx::prelude::*;

/// The trigger's arguments as given to CREATE TRIGGER.
pub(super) fn trigger_args(trigger: &pg_sys::Trigger) -> Vec<String> {
    (0..trigger.tgnargs as usize)
        .map(|i| {
            // SAFETY: tgargs holds tgnargs C strings.
            unsafe { std::ffi::CStr::from_ptr(*trigger.tgargs.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}
