//! The keys of the catalog's name and address indexes: the entity itself (an `Arc` shared with
//! the entity map), ordered by the indexed field, so an index entry costs one pointer and the
//! name or address is stored once.
//!
//! INV-1: a [`ByName`] orders, compares and borrows as its table's name; a [`ByAddr`] orders
//! and compares as its backend's `(host, heartbeat_port)`, and an [`Addr`] finds it. An index
//! entry is only ever made from the `Arc` the entity map holds for the same id, and entities
//! never change in place (a change replaces the `Arc` in both maps), so the indexed field can
//! never drift from the entity.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::sync::Arc;

use equivalent::{Comparable, Equivalent};

use super::types::{Backend, Table};

/// A table in its database's name index (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ByName(pub Arc<Table>);

impl PartialEq for ByName {
    fn eq(&self, other: &ByName) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &ByName) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByName {
    fn cmp(&self, other: &ByName) -> Ordering {
        self.0.name.cmp(&other.0.name)
    }
}

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        &self.0.name
    }
}

/// A backend in the address index (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ByAddr(pub Arc<Backend>);

impl ByAddr {
    fn addr(&self) -> Addr<'_> {
        Addr(&self.0.host, self.0.heartbeat_port)
    }
}

impl PartialEq for ByAddr {
    fn eq(&self, other: &ByAddr) -> bool {
        self.addr() == other.addr()
    }
}

impl Eq for ByAddr {}

impl PartialOrd for ByAddr {
    fn partial_cmp(&self, other: &ByAddr) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByAddr {
    fn cmp(&self, other: &ByAddr) -> Ordering {
        self.addr().cmp(&other.addr())
    }
}

/// A backend address to look up in the address index: `(host, heartbeat_port)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Addr<'a>(pub &'a str, pub u16);

impl Equivalent<ByAddr> for Addr<'_> {
    fn equivalent(&self, key: &ByAddr) -> bool {
        *self == key.addr()
    }
}

impl Comparable<ByAddr> for Addr<'_> {
    fn compare(&self, key: &ByAddr) -> Ordering {
        self.cmp(&key.addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::catalog::BackendState;
    use imbl::OrdMap;

    fn table(id: u64, name: &str) -> Arc<Table> {
        Arc::new(Table {
            id,
            db_id: 1,
            name: name.into(),
            columns: Default::default(),
        })
    }

    fn backend(id: u64, host: &str, port: u16) -> Arc<Backend> {
        Arc::new(Backend {
            id,
            host: host.into(),
            heartbeat_port: port,
            state: BackendState::Normal,
            capacity_bytes: 0,
        })
    }

    #[test]
    fn tables_are_indexed_by_name_only() {
        let mut m = OrdMap::new();
        m.insert(ByName(table(2, "b")), ());
        m.insert(ByName(table(1, "a")), ());
        assert_eq!(ByName(table(1, "x")), ByName(table(2, "x")));
        assert_eq!(m.get_key_value("a").map(|(t, _)| t.0.id), Some(1));
        assert!(m.get("c").is_none());
        let names: Vec<&str> = m.keys().map(|t| t.0.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(m.remove("b").is_some());
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn backends_are_indexed_by_host_then_port() {
        let mut m = OrdMap::new();
        for (id, host, port) in [(1, "h2", 1), (2, "h1", 9), (3, "h1", 2)] {
            m.insert(ByAddr(backend(id, host, port)), ());
        }
        let ids: Vec<u64> = m.keys().map(|b| b.0.id).collect();
        assert_eq!(ids, [3, 2, 1]);
        assert_eq!(
            m.get_key_value(&Addr("h1", 9)).map(|(b, _)| b.0.id),
            Some(2)
        );
        assert!(!m.contains_key(&Addr("h1", 1)));
        assert!(m.remove(&Addr("h2", 1)).is_some());
        assert_eq!(m.len(), 2);
        assert_eq!(ByAddr(backend(7, "h", 1)), ByAddr(backend(8, "h", 1)));
    }
}
