//! Per-node network namespaces, so a test can cut the network between two nodes (a partition)
//! and heal it, as in a real data centre: packets between them are dropped by the kernel while
//! the cut lasts, TCP keeps what it could not send and retransmits it after the heal.
//!
//! ```text
//!   test process (host namespace)  10.213.N.1 ── bridge fesbrP ──┬── veth ── ns fes-P-1: 10.213.N.2
//!                                                                ├── veth ── ns fes-P-2: 10.213.N.3
//!                                                                └── veth ── ns fes-P-3: 10.213.N.4
//! ```
//! `P` is the test process id; `N` is derived from it and skips subnets already on an
//! interface of the machine, so concurrent test binaries do not collide. A cut between `a` and
//! `b` is a blackhole route to the other's address inside each of the two namespaces.
//!
//! Faults at the link layer ([`super::netlab_tc`], with `tc`): a one-way cut
//! ([`NetLab::cut_one_way`]: `a`'s packets to `b` vanish on the bridge, `b`'s to `a` arrive),
//! random loss and netem delay on one node's veth ([`NetLab::impair`]).
//!
//! INV-1: everything created here (namespaces, the bridge and its veths, routes, tc qdiscs and
//! filters, the sink veth) is removed when the [`NetLab`] drops, also when the test panics; a
//! failure to remove is printed with the command to run by hand. (The kernel frees a deleted
//! namespace once the last socket in it is gone; with its interfaces deleted first, nothing of
//! it stays visible meanwhile.)
//! INV-2: [`NetLab::create`] returns [`NetLabUnavailable`] (the test prints it and skips)
//! when the machine cannot do this: not root, no `ip`, or no network namespaces.
//! INV-3: at most one lab exists at a time in a test process (its names derive from the pid);
//! [`NetLab::create`] waits for the previous one to drop.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::{Condvar, Mutex};

use super::netlab_tc::{self, Impairment};

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
    /// Link-layer faults in place (one-way cuts, impairments) and the sink veth.
    tc: netlab_tc::TcState,
    _slot: LabSlot,
}

/// Runs `ip args`; its stdout, or an error naming the command and its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args).map(drop)
}

/// The first subnet `10.213.N.0/24` (N in 20..220, from `20 + pid % 200` on) that no interface
/// of the machine has an address in: another test binary's lab, or anything else.
fn free_subnet(pid: u32) -> u32 {
    let used = run("ip", &["-o", "-4", "addr", "show"]).unwrap_or_default();
    (0..200)
        .map(|k| 20 + (pid + k) % 200)
        .find(|n| !used.contains(&format!("10.213.{n}.")))
        .unwrap_or(20 + pid % 200)
}

impl NetLab {
    /// Creates one namespace per sid and the bridge that joins them to this process (INV-2).
    pub fn create(sids: &[u64]) -> Result<NetLab, NetLabUnavailable> {
        let slot = LabSlot::acquire();
        let pid = std::process::id();
        let mut lab = NetLab {
            pid,
            subnet: free_subnet(pid),
            sids: sids.to_vec(),
            created_ns: Vec::new(),
            created_veths: Vec::new(),
            bridge: None,
            cuts: Mutex::new(BTreeSet::new()),
            tc: netlab_tc::TcState::default(),
            _slot: slot,
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
            let veth = self.veth(sid);
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

    /// The host end of node `sid`'s veth (on the bridge): its egress carries packets to the
    /// node, its ingress packets from it.
    pub fn veth(&self, sid: u64) -> String {
        format!("fesv{}n{sid}", self.pid)
    }

    /// Drops `from`'s packets to `to` on the bridge (a tc filter on `from`'s veth); `to`'s
    /// packets to `from` still arrive. Unlike a blackhole route in `from`'s namespace, the
    /// sender is not told: its packets are lost in the network, as on a real one-way failure.
    /// Heal with [`NetLab::heal_one_way`].
    pub fn cut_one_way(&self, from: u64, to: u64) -> Result<(), String> {
        let (veth, dst) = (self.veth(from), self.host(to));
        self.tc.cut_one_way(self.pid, &veth, &dst, (from, to))
    }

    /// `Err(why)` when this machine cannot do the link-layer faults ([`NetLab::cut_one_way`],
    /// loss): no `tc`, or a kernel without the clsact qdisc, the u32 or bpf classifier or the
    /// mirred action. A test prints it and skips.
    pub fn tc_usable(&self) -> Result<(), String> {
        let sid = self.sids.first().copied().unwrap_or(1);
        self.tc.probe(self.pid, &self.veth(sid))
    }

    /// Heals a [`NetLab::cut_one_way`].
    pub fn heal_one_way(&self, from: u64, to: u64) -> Result<(), String> {
        self.tc.heal_one_way(&self.veth(from), (from, to))
    }

    /// Degrades node `sid`'s link both ways (its veth on the bridge): random loss with a tc
    /// filter, delay with netem. Replaces an impairment already there; [`NetLab::restore`]
    /// removes it. `Err(Unsupported)` when the kernel lacks what it needs (e.g. no netem).
    pub fn impair(&self, sid: u64, how: Impairment) -> Result<(), netlab_tc::TcError> {
        self.tc
            .impair(self.pid, &self.veth(sid), &self.netns(sid), sid, how)
    }

    /// Removes node `sid`'s impairment.
    pub fn restore(&self, sid: u64) -> Result<(), String> {
        self.tc.restore(&self.veth(sid), &self.netns(sid), sid)
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
        let veths: Vec<(u64, String, String)> = self
            .sids
            .iter()
            .map(|s| (*s, self.veth(*s), self.netns(*s)))
            .collect();
        self.tc.remove_all(&veths);
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

/// The process-wide lab slot: one lab at a time (module INV-3).
#[derive(Debug)]
struct LabSlot;

static LAB_BUSY: Mutex<bool> = Mutex::new(false);
static LAB_FREED: Condvar = Condvar::new();

impl LabSlot {
    fn acquire() -> LabSlot {
        let mut busy = LAB_BUSY.lock().unwrap_or_else(|e| e.into_inner());
        while *busy {
            busy = LAB_FREED.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        LabSlot
    }
}

impl Drop for LabSlot {
    fn drop(&mut self) {
        *LAB_BUSY.lock().unwrap_or_else(|e| e.into_inner()) = false;
        LAB_FREED.notify_one();
    }
}
