//! Helpers shared by the AVX-512 paths of normalization and shingle hashing.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The (at most) 64 bytes of `bytes` from `at`, zero past its end, and the mask of those that
/// are inside it. Never reads outside `bytes`. `at` must be less than `bytes.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn load_64(bytes: &[u8], at: usize) -> (__m512i, __mmask64) {
    assert!(at < bytes.len());
    let len = bytes.len() - at;
    if len >= 64 {
        // SAFETY: the 64 bytes from `at` are inside `bytes`.
        (
            unsafe { _mm512_loadu_si512(bytes.as_ptr().add(at).cast()) },
            !0,
        )
    } else {
        let valid = (1u64 << len) - 1;
        // SAFETY: masked-off bytes are not read (AVX-512 suppresses their faults), and the
        // first `len` bytes from `at` are inside `bytes`.
        let loaded = unsafe { _mm512_maskz_loadu_epi8(valid, bytes.as_ptr().add(at).cast()) };
        (loaded, valid)
    }
}
