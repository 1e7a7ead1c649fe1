//! Connected components of an edge list, for grouping near-duplicate pairs into clusters.

use std::collections::HashMap;

/// Union-find over node ids, with path halving and union by size.
#[derive(Default)]
struct DisjointSets {
    index: HashMap<i64, usize>,
    parent: Vec<usize>,
    size: Vec<usize>,
    ids: Vec<i64>,
}

impl DisjointSets {
    fn node(&mut self, id: i64) -> usize {
        *self.index.entry(id).or_insert_with(|| {
            self.parent.push(self.ids.len());
            self.size.push(1);
            self.ids.push(id);
            self.ids.len() - 1
        })
    }

    fn root(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.root(a), self.root(b));
        if a == b {
            return;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a;
        self.size[a] += self.size[b];
    }
}

/// Every node of a component with at least two nodes, as `(id, smallest id in its component)`,
/// sorted by component then id. Edges are undirected; self-loops and repeats are harmless.
pub fn components(edges: impl IntoIterator<Item = (i64, i64)>) -> Vec<(i64, i64)> {
    let mut sets = DisjointSets::default();
    for (a, b) in edges {
        let (a, b) = (sets.node(a), sets.node(b));
        sets.union(a, b);
    }
    let mut smallest: HashMap<usize, i64> = HashMap::new();
    for i in 0..sets.ids.len() {
        let root = sets.root(i);
        let id = sets.ids[i];
        smallest
            .entry(root)
            .and_modify(|m| *m = (*m).min(id))
            .or_insert(id);
    }
    let mut out: Vec<(i64, i64)> = (0..sets.ids.len())
        .filter_map(|i| {
            let root = sets.root(i);
            (sets.size[root] >= 2).then(|| (sets.ids[i], smallest[&root]))
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
