//! Per-node network namespaces, so a test can cut the network between two nodes (a partition)
//! and heal it, as in a real data centre: packets between them are dropped by the kernel while
//! the cut lasts, TCP keeps what it could not send and retransmits it after the heal.
//!
//! ```text
//!   test process (host namespace)  10.213.N.1 ── bridge fesbrP ──┬── veth ── ns fes-P-1: 10.213.N.2
//!                                                                ├── veth ── ns fes-P-2: 10.213.N.3
//!                                                                └── veth ── ns fes-P-3: 10.213.N.4
//! ```
//! `P` is the test process id; `N` is derived from it, so concurrent test binaries do not
//! collide. A cut between `a` and `b` is a blackhole route to the other's address inside each
//! of the two namespaces.
//!
//! INV-1: everything created here (namespaces, the bridge and its veths, routes) is removed when
//! the [`NetLab`] drops, also when the test panics; a failure to remove is printed with the
//! command to run by hand. (The kernel frees a deleted namespace once the last socket in it is
//! gone; with its interfaces deleted first, nothing of it stays visible meanwhile.)
//! INV-2: [`NetLab::create`] returns [`NetLabUnavailable`] (the test prints it and skips)
//! when the machine cannot do this: not root, no `ip`, or no network namespaces.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Mutex;

/// Why the network lab cannot run here (the test skips with this message).
#[derive(Debug)]
pub struct NetLabUnavailable(pub String);

impl std::fmt::Display for NetLabUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Namespaces and a bridge for `nodes` (see the module docs).
#[derive(Debug)]
pub struct NetLab {
    pid: u32,
    subnet: u32,
    sids: Vec<u64>,
    created_ns: Vec<String>,
    created_veths: Vec<String>,
    bridge: Option<String>,
    cuts: Mutex<BTreeSet<(u64, u64)>>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetLab {
    /// Creates one namespace per sid and the bridge that joins them to this process (INV-2).
    pub fn create(sids: &[u64]) -> Result<NetLab, NetLabUnavailable> {
        let pid = std::process::id();
        let mut lab = NetLab {
            pid,
            subnet: 20 + pid % 200,
            sids: sids.to_vec(),
            created_ns: Vec::new(),
            created_veths: Vec::new(),
            bridge: None,
            cuts: Mutex::new(BTreeSet::new()),
        };
        lab.build().map_err(|e| {
            NetLabUnavailable(format!(
                "cannot build the network lab (it needs root and iproute2's `ip` with \
                     network namespaces): {e}"
            ))
        })?;
        Ok(lab)
    }

    fn build(&mut self) -> Result<(), String> {
        let bridge = format!("fesbr{}", self.pid);
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        self.bridge = Some(bridge.clone());
        ip(&[
            "addr",
            "add",
            &format!("10.213.{}.1/24", self.subnet),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for &sid in &self.sids.clone() {
            let ns = self.netns(sid);
            ip(&["netns", "add", &ns])?;
            self.created_ns.push(ns.clone());
            let veth = format!("fesv{}n{sid}", self.pid);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            self.created_veths.push(veth.clone());
            ip(&["link", "set", &veth, "master", &bridge, "up"])?;
            let addr = format!("{}/24", self.host(sid));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// Node `sid`'s address.
    pub fn host(&self, sid: u64) -> String {
        format!("10.213.{}.{}", self.subnet, sid + 1)
    }

    /// Node `sid`'s namespace name (for `ip netns exec`).
    pub fn netns(&self, sid: u64) -> String {
        format!("fes-{}-{sid}", self.pid)
    }

    /// Cuts the network between `a` and `b`, both ways.
    pub fn cut(&self, a: u64, b: u64) -> Result<(), String> {
        self.route("add", a, b)?;
        self.route("add", b, a)?;
        self.lock_cuts().insert((a.min(b), a.max(b)));
        Ok(())
    }

    /// Heals a cut made by [`NetLab::cut`].
    pub fn heal(&self, a: u64, b: u64) -> Result<(), String> {
        self.lock_cuts().remove(&(a.min(b), a.max(b)));
        let one = self.route("del", a, b);
        let other = self.route("del", b, a);
        one.and(other)
    }

    fn route(&self, verb: &str, from: u64, to: u64) -> Result<(), String> {
        let target = format!("{}/32", self.host(to));
        ip(&["-n", &self.netns(from), "route", verb, "blackhole", &target])
    }

    fn lock_cuts(&self) -> std::sync::MutexGuard<'_, BTreeSet<(u64, u64)>> {
        self.cuts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        let cuts: Vec<(u64, u64)> = self.lock_cuts().iter().copied().collect();
        for (a, b) in cuts {
            if let Err(e) = self.heal(a, b) {
                eprintln!("netlab: healing {a}-{b} failed: {e}");
            }
        }
        // The veths first: a namespace outlives its `ip netns del` while closed sockets in it
        // still retransmit, and would keep its veth pair (and the host end) meanwhile.
        for veth in self.created_veths.drain(..) {
            if let Err(e) = ip(&["link", "del", &veth]) {
                eprintln!("netlab: {e}; remove it with `ip link del {veth}`");
            }
        }
        for ns in self.created_ns.drain(..) {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("netlab: {e}; remove it with `ip netns del {ns}`");
            }
        }
        if let Some(bridge) = self.bridge.take() {
            if let Err(e) = ip(&["link", "del", &bridge]) {
                eprintln!("netlab: {e}; remove it with `ip link del {bridge}`");
            }
        }
    }
}
