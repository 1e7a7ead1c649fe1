//! Allocations whose size depends on the input. They are made fallibly: a text or a table too
//! large for the memory at hand is an error the caller reports, never an abort of the process
//! (Rust's default response to a failed allocation, which takes a PostgreSQL backend and then
//! every other connection down with it).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::sync::OnceLock;

/// Gives the memory freed so far back to the system: the allocator keeps freed blocks in its
/// arenas as resident memory, such as what a whole-table search frees once its rows are read
/// (glibc's `malloc_trim`; elsewhere nothing). It holds each arena's lock while it walks it.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only hands free pages of the allocator's arenas back to the kernel,
    // under the arenas' locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// An input too large to process: an allocation failed, or a result would pass a hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacityError {
    /// Allocating `bytes` more for `what` failed (SQLSTATE 53200 out_of_memory).
    OutOfMemory { what: &'static str, bytes: usize },
    /// `what` would take `bytes`, more than `limit` (SQLSTATE 54000 program_limit_exceeded).
    TooLarge {
        what: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// A temporary file failed with OS error `errno` (SQLSTATE 53100 disk_full for ENOSPC,
    /// 58030 io_error otherwise).
    TempFile { errno: i32 },
    /// The temporary files would pass `temp_file_limit`, `kilobytes` (SQLSTATE 53400
    /// configuration_limit_exceeded, as PostgreSQL's own temporary files).
    TempFileLimit { kilobytes: u64 },
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CapacityError::OutOfMemory { what, bytes } => write!(
                f,
                "out of memory for {what} (failed to allocate {bytes} more bytes)"
            ),
            CapacityError::TooLarge { what, bytes, limit } => write!(
                f,
                "{what} would take {bytes} bytes, more than the limit of {limit}"
            ),
            CapacityError::TempFile { errno } => write!(
                f,
                "could not use a temporary file for the rows being searched: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            CapacityError::TempFileLimit { kilobytes } => write!(
                f,
                "temporary file size exceeds temp_file_limit ({kilobytes}kB)"
            ),
        }
    }
}

impl std::error::Error for CapacityError {}

/// Where the functions that cannot return an error send one: see [`set_handler`].
static HANDLER: OnceLock<fn(CapacityError) -> !> = OnceLock::new();

/// Makes `handler` the response to a [`CapacityError`] in the functions that keep an
/// infallible signature (`Signer::signature`, `ShingleSet::new`, ...). The SQL layer installs
/// one that raises the error's SQLSTATE; without one, they panic. Only the first call counts.
pub fn set_handler(handler: fn(CapacityError) -> !) {
    let _ = HANDLER.set(handler);
}

impl CapacityError {
    /// Reports the error through the installed handler, or panics with it.
    pub fn fail(self) -> ! {
        match HANDLER.get() {
            Some(handler) => handler(self),
            None => panic!("{self}"),
        }
    }

    fn out_of_memory<T>(what: &'static str, additional: usize) -> CapacityError {
        CapacityError::OutOfMemory {
            what,
            bytes: additional.saturating_mul(std::mem::size_of::<T>()),
        }
    }
}

/// Reserves room for `additional` more elements in `v`.
#[inline]
pub fn reserve<T>(
    v: &mut Vec<T>,
    additional: usize,
    what: &'static str,
) -> Result<(), CapacityError> {
    v.try_reserve(additional)
        .map_err(|_| CapacityError::out_of_memory::<T>(what, additional))
}

/// Reserves room for `additional` more bytes in `s`.
#[inline]
pub fn reserve_str(
    s: &mut String,
    additional: usize,
    what: &'static str,
) -> Result<(), CapacityError> {
    s.try_reserve(additional)
        .map_err(|_| CapacityError::out_of_memory::<u8>(what, additional))
}

/// Reserves room for `additional` more entries in `map`.
#[inline]
pub fn reserve_map<K: Eq + Hash, V>(
    map: &mut HashMap<K, V>,
    additional: usize,
    what: &'static str,
) -> Result<(), CapacityError> {
    map.try_reserve(additional)
        .map_err(|_| CapacityError::out_of_memory::<(K, V)>(what, additional))
}

/// Reserves room for `additional` more elements in `set`.
#[inline]
pub fn reserve_set<T: Eq + Hash>(
    set: &mut HashSet<T>,
    additional: usize,
    what: &'static str,
) -> Result<(), CapacityError> {
    set.try_reserve(additional)
        .map_err(|_| CapacityError::out_of_memory::<T>(what, additional))
}

/// Appends `x` to `v`, growing it fallibly.
#[inline]
pub fn push<T>(v: &mut Vec<T>, x: T, what: &'static str) -> Result<(), CapacityError> {
    if v.len() == v.capacity() {
        reserve(v, 1, what)?;
    }
    v.push(x);
    Ok(())
}

/// A vector of `len` copies of `value`, allocated fallibly.
pub fn filled<T: Clone>(len: usize, value: T, what: &'static str) -> Result<Vec<T>, CapacityError> {
    let mut v = Vec::new();
    reserve(&mut v, len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// A copy of `text`, allocated fallibly.
pub fn copy_str(text: &str, what: &'static str) -> Result<String, CapacityError> {
    let mut s = String::new();
    reserve_str(&mut s, text.len(), what)?;
    s.push_str(text);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_what_and_how_much() {
        let mut v: Vec<u64> = Vec::new();
        assert_eq!(
            reserve(&mut v, usize::MAX / 4, "keys"),
            Err(CapacityError::OutOfMemory {
                what: "keys",
                bytes: usize::MAX
            })
        );
        assert!(v.capacity() == 0);
        // more than isize::MAX bytes: refused before asking the allocator
        assert_eq!(
            filled(usize::MAX / 8 + 1, 0u64, "offsets"),
            Err(CapacityError::OutOfMemory {
                what: "offsets",
                bytes: usize::MAX
            })
        );
        let mut s = String::from("x");
        assert_eq!(
            reserve_str(&mut s, usize::MAX, "text"),
            Err(CapacityError::OutOfMemory {
                what: "text",
                bytes: usize::MAX
            })
        );
        let mut map: HashMap<u64, u32> = HashMap::new();
        assert!(reserve_map(&mut map, usize::MAX / 2, "texts").is_err());
        assert_eq!(
            CapacityError::OutOfMemory {
                what: "text",
                bytes: 12
            }
            .to_string(),
            "out of memory for text (failed to allocate 12 more bytes)"
        );
        assert_eq!(
            CapacityError::TooLarge {
                what: "the text[] result",
                bytes: 2_000_000_000,
                limit: 1_073_741_823
            }
            .to_string(),
            "the text[] result would take 2000000000 bytes, more than the limit of 1073741823"
        );
    }

    #[test]
    fn without_a_handler_the_infallible_paths_panic_with_the_message() {
        let e = CapacityError::OutOfMemory {
            what: "keys",
            bytes: 8,
        };
        let panic = std::panic::catch_unwind(|| e.fail()).unwrap_err();
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some("out of memory for keys (failed to allocate 8 more bytes)")
        );
    }
}
