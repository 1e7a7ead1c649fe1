//! Sorting input-sized arrays so that a cancel or `statement_timeout` stops it: one
//! `sort_unstable` of a hundred million elements runs for seconds without a check.

use std::cmp::Ordering;

use super::capacity::{reserve, CapacityError};

/// Arrays up to this long are sorted in one go (tens of milliseconds); longer ones are sorted
/// in pieces of this length, merged with an interrupt check every this many elements.
const PIECE: usize = 1 << 20;

/// Sorts `v` by `compare`, calling `check_interrupts` between pieces of work of at most
/// [`PIECE`] elements. A short array is sorted in place as `sort_unstable_by` sorts it; a long
/// one is sorted in pieces that are then merged through a copy of it, allocated fallibly.
pub fn sort_by<T: Copy>(
    v: &mut [T],
    mut compare: impl FnMut(&T, &T) -> Ordering,
    check_interrupts: &mut dyn FnMut(),
) -> Result<(), CapacityError> {
    sort_in_pieces(v, PIECE, &mut compare, check_interrupts)
}

/// Sorts `keys` ascending in place, calling `check_interrupts` between pieces of work of at
/// most [`PIECE`] elements. A long array is sorted by its top byte with an in-place radix pass
/// (American flag sort), then each bucket the same way by the next byte, down to buckets short
/// enough for one `sort_unstable`: no memory beyond the array, and at most eight passes over it
/// whatever the keys.
pub fn sort_u64(keys: &mut [u64], check_interrupts: &mut dyn FnMut()) {
    radix_sort(
        keys,
        &|&k| u128::from(k),
        56,
        PIECE,
        &mut 0,
        check_interrupts,
    )
}

/// Sorts `v` ascending in place as [`sort_u64`] sorts keys, by `key`, which orders the
/// elements as `T`'s own order does and has no bit set above `bits`: no memory beyond the
/// array (where [`sort_by`] merges through a copy of it), and at most `bits / 8` passes.
pub fn sort_by_key_in_place<T: Copy + Ord>(
    v: &mut [T],
    key: impl Fn(&T) -> u128,
    bits: u32,
    check_interrupts: &mut dyn FnMut(),
) {
    let top = bits.div_ceil(8).max(1) * 8 - 8;
    radix_sort(v, &key, top, PIECE, &mut 0, check_interrupts)
}

/// Radix sort of `v` by `key`, whose bits above `shift + 8` are equal for all of `v`. `work`
/// counts elements looked at or moved since the last interrupt check.
fn radix_sort<T: Copy + Ord>(
    v: &mut [T],
    key: &impl Fn(&T) -> u128,
    shift: u32,
    piece: usize,
    work: &mut usize,
    check_interrupts: &mut dyn FnMut(),
) {
    let mut tick = |work: &mut usize, amount: usize| {
        *work += amount;
        if *work >= piece {
            *work = 0;
            check_interrupts();
        }
    };
    if v.len() <= piece {
        // (`T`'s order is the key's, and cheaper to compare than a computed key)
        v.sort_unstable();
        tick(work, v.len());
        return;
    }
    let digit = |x: &T| (key(x) >> shift) as u8 as usize;
    let mut ends = [0usize; 256];
    for x in v.iter() {
        ends[digit(x)] += 1;
    }
    tick(work, v.len());
    let mut starts = [0usize; 256];
    let mut total = 0;
    for d in 0..256 {
        starts[d] = total;
        total += ends[d];
        ends[d] = total;
    }
    // next[d]: the first slot of bucket d not yet holding an element of digit d
    let mut next = starts;
    for d in 0..256 {
        while next[d] < ends[d] {
            let mut x = v[next[d]];
            while digit(&x) != d {
                let e = digit(&x);
                std::mem::swap(&mut x, &mut v[next[e]]);
                next[e] += 1;
                tick(work, 1);
            }
            v[next[d]] = x;
            next[d] += 1;
        }
    }
    tick(work, v.len());
    if shift > 0 {
        for d in 0..256 {
            radix_sort(
                &mut v[starts[d]..ends[d]],
                key,
                shift - 8,
                piece,
                work,
                check_interrupts,
            );
        }
    }
}

fn sort_in_pieces<T: Copy>(
    v: &mut [T],
    piece: usize,
    compare: &mut impl FnMut(&T, &T) -> Ordering,
    check_interrupts: &mut dyn FnMut(),
) -> Result<(), CapacityError> {
    let n = v.len();
    if n <= piece {
        v.sort_unstable_by(|a, b| compare(a, b));
        return Ok(());
    }
    for chunk in v.chunks_mut(piece) {
        chunk.sort_unstable_by(|a, b| compare(a, b));
        check_interrupts();
    }
    let mut scratch = Vec::new();
    reserve(&mut scratch, n, "a sort")?;
    scratch.extend_from_slice(v);
    // runs of `width` sorted elements are merged pairwise from one buffer into the other
    let (mut from, mut to): (&mut [T], &mut [T]) = (v, &mut scratch[..]);
    let mut in_v = true;
    let mut width = piece;
    let mut countdown = piece;
    while width < n {
        for start in (0..n).step_by(2 * width) {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (left, right) = (&from[start..mid], &from[mid..end]);
            let out = &mut to[start..end];
            let (mut i, mut j) = (0, 0);
            for slot in out.iter_mut() {
                let take_right = j < right.len()
                    && (i == left.len() || compare(&right[j], &left[i]) == Ordering::Less);
                *slot = if take_right { right[j] } else { left[i] };
                j += usize::from(take_right);
                i += usize::from(!take_right);
                countdown -= 1;
                if countdown == 0 {
                    countdown = piece;
                    check_interrupts();
                }
            }
        }
        std::mem::swap(&mut from, &mut to);
        in_v = !in_v;
        width *= 2;
    }
    if !in_v {
        to.copy_from_slice(from);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testing::Rng;

    #[test]
    fn pieces_and_merges_give_the_sorted_array() {
        let mut rng = Rng(3);
        for (n, piece) in [
            (0, 4),
            (3, 4),
            (4, 4),
            (5, 4),
            (17, 4),
            (64, 8),
            (1000, 7),
            (4099, 64),
        ] {
            for distinct in [2, 1 << 40] {
                let input: Vec<u64> = (0..n).map(|_| rng.below(distinct)).collect();
                let mut want = input.clone();
                want.sort_unstable();
                let mut got = input.clone();
                let mut checks = 0;
                sort_in_pieces(&mut got, piece, &mut Ord::cmp, &mut || checks += 1).unwrap();
                assert_eq!(got, want, "n {n} piece {piece}");
                // one check per piece sorted and per `piece` elements merged
                if n > piece {
                    let pieces = n.div_ceil(piece);
                    let passes = pieces.next_power_of_two().trailing_zeros() as usize;
                    assert_eq!(checks, pieces + passes * n / piece, "n {n} piece {piece}");
                } else {
                    assert_eq!(checks, 0);
                }
            }
        }
    }

    #[test]
    fn radix_passes_by_a_key_sort_pairs_as_their_order() {
        let mut rng = Rng(5);
        for (n, piece) in [(0, 4), (7, 4), (3000, 16), (20_000, 1000)] {
            for keys in [1u64, 3, 1 << 40] {
                let input: Vec<(u64, u32)> = (0..n).map(|t| (rng.below(keys), t)).collect();
                let mut want = input.clone();
                want.sort_unstable();
                let mut got = input;
                let key = |&(k, t): &(u64, u32)| (u128::from(k) << 32) | u128::from(t);
                radix_sort(&mut got, &key, 88, piece, &mut 0, &mut || {});
                assert_eq!(got, want, "n {n} piece {piece} keys {keys}");
            }
        }
        let mut small = vec![(3u64, 1u32), (1, 2), (3, 0)];
        sort_by_key_in_place(
            &mut small,
            |&(k, t)| (u128::from(k) << 32) | u128::from(t),
            96,
            &mut || {},
        );
        assert_eq!(small, [(1, 2), (3, 0), (3, 1)]);
    }

    #[test]
    fn radix_passes_give_the_sorted_array() {
        let mut rng = Rng(4);
        type Key = fn(&mut Rng, u64) -> u64;
        let shapes: [(&str, Key); 5] = [
            ("uniform", |rng, _| rng.below(u64::MAX)),
            ("one hash, ordinals", |_, i| (7 << 32) | i),
            ("few hashes", |rng, i| (rng.below(3) << 40) | i),
            ("all equal", |_, _| 42),
            ("one top byte", |rng, _| (0xAB << 56) | rng.below(1 << 20)),
        ];
        for (shape, key) in shapes {
            for (n, piece) in [(0, 4), (5, 4), (300, 4), (5000, 16), (20_000, 1000)] {
                let input: Vec<u64> = (0..n).map(|i| key(&mut rng, i)).collect();
                let mut want = input.clone();
                want.sort_unstable();
                let mut got = input;
                let mut checks = 0;
                radix_sort(
                    &mut got,
                    &|&k| u128::from(k),
                    56,
                    piece,
                    &mut 0,
                    &mut || checks += 1,
                );
                assert_eq!(got, want, "{shape}: n {n} piece {piece}");
                // a check after each pass over a bucket, and after every `piece` moves
                if n as usize > piece {
                    let moves_alone = if shape == "uniform" {
                        n as usize / piece
                    } else {
                        1
                    };
                    assert!(checks >= moves_alone, "{shape}: n {n}: {checks} checks");
                }
            }
        }
    }
}
