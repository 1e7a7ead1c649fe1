//! Connected components of an edge list, for grouping near-duplicate pairs into clusters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use super::capacity::{filled, push, reserve, reserve_map, CapacityError};

/// Edges or nodes handled between interrupt checks.
const CHECK_EVERY: usize = 1 << 16;

/// Union-find over nodes `0..n`, with path halving and union by size.
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    pub fn try_new(n: usize) -> Result<UnionFind, CapacityError> {
        let mut parent = Vec::new();
        reserve(&mut parent, n, "the clusters")?;
        parent.extend(0..n as u32);
        Ok(UnionFind {
            parent,
            size: filled(n, 1, "the clusters")?,
        })
    }

    fn try_push(&mut self) -> Result<usize, CapacityError> {
        let new = self.parent.len() as u32;
        push(&mut self.parent, new, "the clusters")?;
        push(&mut self.size, 1, "the clusters")?;
        Ok(self.parent.len() - 1)
    }

    pub fn root(&mut self, x: usize) -> usize {
        let mut x = x as u32;
        while self.parent[x as usize] != x {
            let grandparent = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grandparent;
            x = grandparent;
        }
        x as usize
    }

    pub fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.root(a), self.root(b));
        if a == b {
            return;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a as u32;
        self.size[a] += self.size[b];
    }

    fn size_of(&mut self, x: usize) -> u32 {
        let root = self.root(x);
        self.size[root]
    }
}

/// Union-find over nodes `0..n` that threads share: a root is linked under the smaller of the
/// two roots by compare-and-swap, and paths are halved as they are walked (each halving a
/// compare-and-swap that may fail harmlessly). Unions may run in any order on any thread; the
/// sets once every union has returned are those of the unions, as with [`UnionFind`]. A root
/// read while other threads join sets may be out of date, never wrong about two nodes it
/// reports joined.
pub struct SharedUnionFind {
    parent: Vec<AtomicU32>,
}

impl SharedUnionFind {
    pub fn try_new(n: usize) -> Result<SharedUnionFind, CapacityError> {
        let mut parent = Vec::new();
        reserve(&mut parent, n, "the clusters")?;
        parent.extend((0..n as u32).map(AtomicU32::new));
        Ok(SharedUnionFind { parent })
    }

    pub fn root(&self, x: usize) -> usize {
        let mut x = x as u32;
        loop {
            let p = self.parent[x as usize].load(Ordering::Relaxed);
            if p == x {
                return x as usize;
            }
            let grandparent = self.parent[p as usize].load(Ordering::Relaxed);
            if grandparent != p {
                let _ = self.parent[x as usize].compare_exchange_weak(
                    p,
                    grandparent,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            x = grandparent;
        }
    }

    pub fn union(&self, a: usize, b: usize) {
        loop {
            let (a_root, b_root) = (self.root(a), self.root(b));
            if a_root == b_root {
                return;
            }
            let (low, high) = (a_root.min(b_root), a_root.max(b_root));
            // links `high` only if it is still a root; else another thread moved it: retry
            if self.parent[high]
                .compare_exchange(
                    high as u32,
                    low as u32,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Every node of a component with at least two nodes, as `(id, smallest id in its component)`,
/// sorted by component then id. Edges are undirected; self-loops and repeats are harmless.
pub fn try_components(
    edges: impl IntoIterator<Item = (i64, i64)>,
    check_interrupts: &mut dyn FnMut(),
) -> Result<Vec<(i64, i64)>, CapacityError> {
    let mut sets = UnionFind::try_new(0)?;
    let mut index: HashMap<i64, usize> = HashMap::new();
    let mut ids: Vec<i64> = Vec::new();
    let mut node = |sets: &mut UnionFind, id: i64| -> Result<usize, CapacityError> {
        if let Some(&i) = index.get(&id) {
            return Ok(i);
        }
        reserve_map(&mut index, 1, "the clusters")?;
        push(&mut ids, id, "the clusters")?;
        let i = sets.try_push()?;
        index.insert(id, i);
        Ok(i)
    };
    for (i, (a, b)) in edges.into_iter().enumerate() {
        let (a, b) = (node(&mut sets, a)?, node(&mut sets, b)?);
        sets.union(a, b);
        if i % CHECK_EVERY == 0 {
            check_interrupts();
        }
    }
    drop(index);
    // smallest id per root
    let mut smallest = filled(ids.len(), i64::MAX, "the clusters")?;
    for (i, &id) in ids.iter().enumerate() {
        let root = sets.root(i);
        smallest[root] = smallest[root].min(id);
    }
    let mut out = Vec::new();
    for i in 0..ids.len() {
        if sets.size_of(i) >= 2 {
            push(&mut out, (ids[i], smallest[sets.root(i)]), "the clusters")?;
        }
        if i % CHECK_EVERY == 0 {
            check_interrupts();
        }
    }
    super::sort::sort_by(
        &mut out,
        |x, y| (x.1, x.0).cmp(&(y.1, y.0)),
        check_interrupts,
    )?;
    Ok(out)
}

/// [`try_components`] without interrupt checks, reporting an error through
/// [`CapacityError::fail`].
pub fn components(edges: impl IntoIterator<Item = (i64, i64)>) -> Vec<(i64, i64)> {
    try_components(edges, &mut || {}).unwrap_or_else(|e| e.fail())
}

#[cfg(test)]
mod tests {
    use super::components;

    #[test]
    fn groups_chains_stars_and_separate_pairs() {
        let edges = [
            (5, 3),
            (3, 9),
            (1, 2),
            (20, 21),
            (21, 22),
            (22, 20),
            (7, 7),
            (2, 1),
        ];
        assert_eq!(
            components(edges),
            [
                (1, 1),
                (2, 1),
                (3, 3),
                (5, 3),
                (9, 3),
                (20, 20),
                (21, 20),
                (22, 20)
            ]
        );
        assert!(components([]).is_empty());
        assert!(
            components([(4, 4)]).is_empty(),
            "a self-loop is not a cluster"
        );
    }

    #[test]
    fn long_chains_are_linear() {
        let n = 200_000;
        let out = components((0..n).map(|i| (i + 1, i)));
        assert_eq!(out.len(), n as usize + 1);
        assert!(out.iter().all(|&(_, c)| c == 0));
    }
}
