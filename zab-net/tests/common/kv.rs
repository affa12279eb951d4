//! A tiny key-value state machine for the node tests: `key=value` writes, copy-on-write map
//! behind a shared handle so a test can read what a node applied.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;

use parking_lot::Mutex;
use zab_core::Zxid;
use zab_net::{ApplyError, Membership, SnapshotSource, StateMachine};

/// The replicated state.
#[derive(Clone, Debug, Default)]
pub struct KvState {
    pub map: BTreeMap<String, String>,
    pub last: Zxid,
    pub applied: u64,
    /// The configurations applied on this node since it started (not in the snapshot).
    pub memberships: Vec<Zxid>,
}

/// A cloneable handle: the node owns one clone, the test reads through another.
#[derive(Clone, Debug, Default)]
pub struct Kv(pub Arc<Mutex<Arc<KvState>>>);

impl Kv {
    pub fn get(&self, key: &str) -> Option<String> {
        self.0.lock().map.get(key).cloned()
    }
    pub fn state(&self) -> Arc<KvState> {
        self.0.lock().clone()
    }
}

struct View(Arc<KvState>);

impl SnapshotSource for View {
    fn write_to(self: Box<Self>, out: &mut dyn Write) -> std::io::Result<()> {
        out.write_all(&self.0.applied.to_be_bytes())?;
        for (k, v) in &self.0.map {
            for s in [k, v] {
                out.write_all(&(s.len() as u32).to_be_bytes())?;
                out.write_all(s.as_bytes())?;
            }
        }
        Ok(())
    }
}

impl StateMachine for Kv {
    fn apply(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ApplyError> {
        let text = std::str::from_utf8(data).map_err(|e| ApplyError::new(e.to_string()))?;
        let (k, v) = text.split_once('=').unwrap_or((text, ""));
        if k == "fail" {
            return Err(ApplyError::new(format!("asked to fail at {zxid}")));
        }
        let mut g = self.0.lock();
        let st = Arc::make_mut(&mut g);
        if zxid <= st.last {
            return Err(ApplyError::new(format!("{zxid} applied after {}", st.last)));
        }
        st.map.insert(k.to_string(), v.to_string());
        st.last = zxid;
        st.applied += 1;
        Ok(())
    }

    fn apply_membership(&mut self, zxid: Zxid, membership: &Membership) -> Result<(), ApplyError> {
        let mut g = self.0.lock();
        let st = Arc::make_mut(&mut g);
        if zxid <= st.last || membership.version != zxid {
            return Err(ApplyError::new(format!(
                "configuration {} at {zxid} applied after {}",
                membership.version, st.last
            )));
        }
        st.last = zxid;
        st.memberships.push(zxid);
        Ok(())
    }

    fn snapshot(&self) -> Box<dyn SnapshotSource> {
        Box::new(View(self.0.lock().clone()))
    }

    fn restore(&mut self, zxid: Zxid, src: &mut dyn Read) -> Result<(), ApplyError> {
        let mut bytes = Vec::new();
        src.read_to_end(&mut bytes)
            .map_err(|e| ApplyError::new(e.to_string()))?;
        let bad = || ApplyError::new("bad kv snapshot");
        let mut st = KvState {
            last: zxid,
            memberships: self.0.lock().memberships.clone(),
            ..KvState::default()
        };
        let (head, mut rest) = bytes.split_at_checked(8).ok_or_else(bad)?;
        st.applied = u64::from_be_bytes(head.try_into().map_err(|_| bad())?);
        let take = |rest: &mut &[u8]| -> Result<String, ApplyError> {
            let (l, r) = rest.split_at_checked(4).ok_or_else(bad)?;
            let len = u32::from_be_bytes(l.try_into().map_err(|_| bad())?) as usize;
            let (s, r) = r.split_at_checked(len).ok_or_else(bad)?;
            *rest = r;
            String::from_utf8(s.to_vec()).map_err(|_| bad())
        };
        while !rest.is_empty() {
            let k = take(&mut rest)?;
            let v = take(&mut rest)?;
            st.map.insert(k, v);
        }
        *self.0.lock() = Arc::new(st);
        Ok(())
    }
}
