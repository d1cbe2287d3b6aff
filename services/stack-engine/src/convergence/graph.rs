//! The traversal graph: nodes are (resource row id, is_update); an edge
//! A → B means B waits for A. Stored in `stack.current_deps` as
//! `{"edges": [[B, A], ...]}` (B requires A) plus `[N, null]` per node.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

/// (resource id, is_update).
pub type Node = (i64, bool);

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraversalGraph {
    /// node → the nodes it waits for.
    preds: BTreeMap<Node, BTreeSet<Node>>,
    /// node → the nodes waiting for it.
    succs: BTreeMap<Node, BTreeSet<Node>>,
}

impl TraversalGraph {
    pub fn add_node(&mut self, n: Node) {
        self.preds.entry(n).or_default();
        self.succs.entry(n).or_default();
    }

    /// `after` waits for `before` (both must be nodes already).
    pub fn add_edge(&mut self, before: Node, after: Node) {
        if before == after || !self.contains(before) || !self.contains(after) {
            return;
        }
        self.preds.entry(after).or_default().insert(before);
        self.succs.entry(before).or_default().insert(after);
    }

    pub fn contains(&self, n: Node) -> bool {
        self.preds.contains_key(&n)
    }

    pub fn nodes(&self) -> impl Iterator<Item = Node> + '_ {
        self.preds.keys().copied()
    }

    pub fn predecessors(&self, n: Node) -> Vec<Node> {
        self.preds.get(&n).map(|s| s.iter().copied().collect()).unwrap_or_default()
    }

    pub fn successors(&self, n: Node) -> Vec<Node> {
        self.succs.get(&n).map(|s| s.iter().copied().collect()).unwrap_or_default()
    }

    /// Nodes nothing waits for: they report to the stack's sync point.
    pub fn roots(&self) -> Vec<Node> {
        self.succs.iter().filter(|(_, s)| s.is_empty()).map(|(n, _)| *n).collect()
    }

    /// Nodes that wait for nothing, cleanup nodes first (as upstream).
    pub fn leaves(&self) -> Vec<Node> {
        let mut leaves: Vec<Node> = self.preds.iter().filter(|(_, p)| p.is_empty()).map(|(n, _)| *n).collect();
        leaves.sort_by_key(|(id, is_update)| (*is_update, *id));
        leaves
    }

    pub fn to_json(&self) -> Value {
        let mut edges: Vec<Value> = Vec::new();
        for (n, preds) in &self.preds {
            edges.push(json!([[n.0, n.1], null]));
            for p in preds {
                edges.push(json!([[n.0, n.1], [p.0, p.1]]));
            }
        }
        json!({ "edges": edges })
    }

    pub fn from_json(v: &Value) -> TraversalGraph {
        let mut g = TraversalGraph::default();
        let node_of = |v: &Value| -> Option<Node> { Some((v.get(0)?.as_i64()?, v.get(1)?.as_bool()?)) };
        let edges = v.get("edges").and_then(Value::as_array).cloned().unwrap_or_default();
        for e in &edges {
            if let Some(n) = e.get(0).and_then(node_of) {
                g.add_node(n);
            }
        }
        for e in &edges {
            if let (Some(n), Some(p)) = (e.get(0).and_then(node_of), e.get(1).and_then(node_of)) {
                g.add_node(p);
                g.add_edge(p, n);
            }
        }
        g
    }
}

/// The label of a predecessor in sync_point_input: "<rid>:<0|1>".
pub fn node_label(n: Node) -> String {
    format!("{}:{}", n.0, if n.1 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shape() {
        let mut g = TraversalGraph::default();
        for n in [(1, true), (2, true), (1, false), (2, false)] {
            g.add_node(n);
        }
        g.add_edge((1, true), (2, true));
        g.add_edge((1, true), (1, false));
        g.add_edge((2, true), (2, false));
        g.add_edge((2, false), (1, false));
        assert_eq!(g.leaves(), vec![(1, true)]);
        assert_eq!(g.roots(), vec![(1, false)]);
        assert_eq!(TraversalGraph::from_json(&g.to_json()), g);
        assert_eq!(node_label((7, false)), "7:0");
    }
}
