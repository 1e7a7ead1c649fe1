//! Connected components of an edge list, for grouping near-duplicate pairs into clusters.

use std::collections::HashMap;

/// Union-find over nodes `0..n`, with path halving and union by size.
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    pub fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    fn push(&mut self) -> usize {
        self.parent.push(self.parent.len() as u32);
        self.size.push(1);
        self.parent.len() - 1
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

/// Every node of a component with at least two nodes, as `(id, smallest id in its component)`,
/// sorted by component then id. Edges are undirected; self-loops and repeats are harmless.
pub fn components(edges: impl IntoIterator<Item = (i64, i64)>) -> Vec<(i64, i64)> {
    let mut sets = UnionFind::new(0);
    let mut index: HashMap<i64, usize> = HashMap::new();
    let mut ids: Vec<i64> = Vec::new();
    let mut node = |sets: &mut UnionFind, id: i64| {
        *index.entry(id).or_insert_with(|| {
            ids.push(id);
            sets.push()
        })
    };
    for (a, b) in edges {
        let (a, b) = (node(&mut sets, a), node(&mut sets, b));
        sets.union(a, b);
    }
    let mut smallest: HashMap<usize, i64> = HashMap::new();
    for (i, &id) in ids.iter().enumerate() {
        let root = sets.root(i);
        smallest
            .entry(root)
            .and_modify(|m| *m = (*m).min(id))
            .or_insert(id);
    }
    let mut out: Vec<(i64, i64)> = (0..ids.len())
        .filter_map(|i| {
            let root = sets.root(i);
            (sets.size_of(i) >= 2).then(|| (ids[i], smallest[&root]))
        })
        .collect();
    out.sort_unstable_by_key(|&(id, cluster)| (cluster, id));
    out
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
