//! Link-layer faults for [`super::NetLab`], with `tc` on the host ends of the nodes' veths:
//!
//! - a one-way cut: a `u32` filter on the ingress of `a`'s veth (packets *from* `a`) that
//!   matches `b`'s address and redirects the packet (`mirred`) to a *sink*: a veth pair whose
//!   peer is down, which drops whatever it is given. IP only, so ARP still flows both ways.
//!   (Kernels without the `gact` drop action still have `mirred`; the sink stands in for it.)
//! - random loss: a classic-BPF `bpf` filter (`ld rand`, compare with the loss fraction of
//!   2^32) on both the ingress and the egress of the node's veth, redirecting to the sink.
//! - delay: a `netem` root qdisc on the veth (packets to the node) and on `eth0` inside the
//!   node's namespace (packets from it). Kernels built without netem answer
//!   [`TcError::Unsupported`] and nothing is left behind.
//!
//! INV-1: every filter, qdisc and the sink created here is recorded before the call returns
//! and removed by [`TcState::remove_all`] (the lab's drop), each failure printed with the
//! command to run by hand.
//! INV-2: filters get unique preferences per lab, so each is deleted alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use thiserror::Error;

use super::netlab::run;

/// How to degrade one node's link (both directions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Impairment {
    /// Packets dropped at random, percent (0 = none), each direction.
    pub loss_pct: u32,
    /// netem delay, ms (0 = none), each direction.
    pub delay_ms: u32,
    /// netem jitter, ms (± around the delay).
    pub jitter_ms: u32,
}

/// A link fault could not be applied.
#[derive(Debug, Error)]
pub enum TcError {
    /// The kernel or `tc` lacks what the fault needs (e.g. the netem qdisc): the test skips it.
    #[error("not supported on this machine: {0}")]
    Unsupported(String),
    /// A `tc` command failed.
    #[error("{0}")]
    Failed(String),
}

/// What is in place (module INV-1).
#[derive(Debug, Default)]
pub struct TcState {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sink: Option<String>,
    clsact: BTreeSet<String>,
    next_pref: u32,
    /// (from, to) → the ingress filter's preference.
    one_way: BTreeMap<(u64, u64), u32>,
    /// sid → what its impairment installed.
    impaired: BTreeMap<u64, Installed>,
}

#[derive(Debug, Default)]
struct Installed {
    /// (direction, preference) of the loss filters.
    loss: Vec<(&'static str, u32)>,
    netem: bool,
}

fn tc(args: &[&str]) -> Result<(), String> {
    run("tc", args).map(drop)
}

/// The classic BPF program of a `loss_pct` % random match, in `tc`'s bytecode syntax:
/// `ld rand; jgt #threshold, +1; ret #-1 (match); ret #0`.
fn loss_bytecode(loss_pct: u32) -> String {
    let threshold = (u64::from(loss_pct.min(100)) * (1u64 << 32) / 100).min(u64::from(u32::MAX));
    let ld_rand = 0xffff_f000u32 + 56; // SKF_AD_OFF + SKF_AD_RANDOM
    format!("4,32 0 0 {ld_rand},37 1 0 {threshold},6 0 0 4294967295,6 0 0 0")
}

impl TcState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops packets entering the bridge from `veth` to `dst` (`key` = (from, to)).
    pub fn cut_one_way(
        &self,
        pid: u32,
        veth: &str,
        dst: &str,
        key: (u64, u64),
    ) -> Result<(), String> {
        let mut g = self.lock();
        if g.one_way.contains_key(&key) {
            return Ok(());
        }
        let sink = g.ensure_sink(pid)?;
        g.ensure_clsact(veth)?;
        let pref = g.pref();
        let (p, dst) = (pref.to_string(), format!("{dst}/32"));
        tc(&[
            "filter", "add", "dev", veth, "ingress", "protocol", "ip", "pref", &p, "u32", "match",
            "ip", "dst", &dst, "action", "mirred", "egress", "redirect", "dev", &sink,
        ])?;
        g.one_way.insert(key, pref);
        Ok(())
    }

    /// Whether this machine can do what [`TcState::cut_one_way`] and loss need (`tc`, the
    /// clsact qdisc, the u32 and bpf classifiers, the mirred action): installs one filter of
    /// each kind on `veth`, matching nothing, and removes them.
    pub fn probe(&self, pid: u32, veth: &str) -> Result<(), String> {
        let mut g = self.lock();
        let sink = g.ensure_sink(pid)?;
        g.ensure_clsact(veth)?;
        let code = loss_bytecode(0);
        let tries: [&[&str]; 2] = [
            &["u32", "match", "ip", "dst", "0.0.0.0/32"],
            &["bpf", "bytecode", &code],
        ];
        for classifier in tries {
            let pref = g.pref().to_string();
            let mut args = vec!["filter", "add", "dev", veth, "ingress", "protocol", "ip"];
            args.extend(["pref", &pref]);
            args.extend(classifier);
            args.extend(["action", "mirred", "egress", "redirect", "dev", &sink]);
            tc(&args)?;
            tc(&["filter", "del", "dev", veth, "ingress", "pref", &pref])?;
        }
        Ok(())
    }

    /// Removes the one-way cut `key` from `veth`.
    pub fn heal_one_way(&self, veth: &str, key: (u64, u64)) -> Result<(), String> {
        let Some(pref) = self.lock().one_way.remove(&key) else {
            return Ok(());
        };
        let p = pref.to_string();
        tc(&["filter", "del", "dev", veth, "ingress", "pref", &p])
    }

    /// Installs `how` on node `sid`'s link, replacing what was there.
    pub fn impair(
        &self,
        pid: u32,
        veth: &str,
        netns: &str,
        sid: u64,
        how: Impairment,
    ) -> Result<(), TcError> {
        self.restore(veth, netns, sid).map_err(TcError::Failed)?;
        let mut g = self.lock();
        let mut installed = Installed::default();
        if how.delay_ms > 0 {
            let (d, j) = (
                format!("{}ms", how.delay_ms),
                format!("{}ms", how.jitter_ms),
            );
            let netem = ["root", "netem", "delay", d.as_str(), j.as_str()];
            let host: Vec<&str> = ["qdisc", "add", "dev", veth]
                .into_iter()
                .chain(netem)
                .collect();
            tc(&host).map_err(|e| {
                if e.contains("unknown") || e.contains("Unknown") {
                    TcError::Unsupported(format!("netem delay ({e})"))
                } else {
                    TcError::Failed(e)
                }
            })?;
            installed.netem = true;
            let inner: Vec<&str> = ["-n", netns, "qdisc", "add", "dev", "eth0"]
                .into_iter()
                .chain(netem)
                .collect();
            if let Err(e) = tc(&inner) {
                g.impaired.insert(sid, installed);
                return Err(TcError::Failed(e));
            }
        }
        if how.loss_pct > 0 {
            let sink = g.ensure_sink(pid).map_err(TcError::Failed)?;
            g.ensure_clsact(veth).map_err(TcError::Failed)?;
            let code = loss_bytecode(how.loss_pct);
            for dir in ["ingress", "egress"] {
                let pref = g.pref();
                let p = pref.to_string();
                let r = tc(&[
                    "filter", "add", "dev", veth, dir, "protocol", "ip", "pref", &p, "bpf",
                    "bytecode", &code, "action", "mirred", "egress", "redirect", "dev", &sink,
                ]);
                if let Err(e) = r {
                    g.impaired.insert(sid, installed);
                    return Err(TcError::Failed(e));
                }
                installed.loss.push((dir, pref));
            }
        }
        g.impaired.insert(sid, installed);
        Ok(())
    }

    /// Removes node `sid`'s impairment (nothing if none).
    pub fn restore(&self, veth: &str, netns: &str, sid: u64) -> Result<(), String> {
        let Some(installed) = self.lock().impaired.remove(&sid) else {
            return Ok(());
        };
        let mut result = Ok(());
        for (dir, pref) in installed.loss {
            let p = pref.to_string();
            result = result.and(tc(&["filter", "del", "dev", veth, dir, "pref", &p]));
        }
        if installed.netem {
            result = result.and(tc(&["qdisc", "del", "dev", veth, "root"]));
            // The namespace's qdisc may not exist (its add failed); the veth's deletion takes
            // it anyway.
            let _ = tc(&["-n", netns, "qdisc", "del", "dev", "eth0", "root"]);
        }
        result
    }

    /// Removes everything (INV-1); `veths` = (sid, host veth, namespace) of every node.
    pub fn remove_all(&self, veths: &[(u64, String, String)]) {
        for (sid, veth, netns) in veths {
            if let Err(e) = self.restore(veth, netns, *sid) {
                eprintln!("netlab: {e}; remove it with `tc qdisc del dev {veth} root`");
            }
        }
        let cuts: Vec<(u64, u64)> = self.lock().one_way.keys().copied().collect();
        for (from, to) in cuts {
            if let Some((_, veth, _)) = veths.iter().find(|(s, _, _)| *s == from) {
                if let Err(e) = self.heal_one_way(veth, (from, to)) {
                    eprintln!("netlab: {e}");
                }
            }
        }
        let mut g = self.lock();
        for veth in std::mem::take(&mut g.clsact) {
            if let Err(e) = tc(&["qdisc", "del", "dev", &veth, "clsact"]) {
                eprintln!("netlab: {e}; remove it with `tc qdisc del dev {veth} clsact`");
            }
        }
        if let Some(sink) = g.sink.take() {
            if let Err(e) = run("ip", &["link", "del", &sink]) {
                eprintln!("netlab: {e}; remove it with `ip link del {sink}`");
            }
        }
    }
}

impl Inner {
    fn pref(&mut self) -> u32 {
        self.next_pref += 1;
        10 + self.next_pref
    }

    /// The sink veth (created on first use): up, its peer down, so it drops what it is given.
    fn ensure_sink(&mut self, pid: u32) -> Result<String, String> {
        if let Some(s) = &self.sink {
            return Ok(s.clone());
        }
        let (sink, peer) = (format!("fesk{pid}"), format!("fesk{pid}p"));
        run(
            "ip",
            &["link", "add", &sink, "type", "veth", "peer", "name", &peer],
        )?;
        self.sink = Some(sink.clone());
        run("ip", &["link", "set", &sink, "up"])?;
        Ok(sink)
    }

    fn ensure_clsact(&mut self, veth: &str) -> Result<(), String> {
        if self.clsact.contains(veth) {
            return Ok(());
        }
        tc(&["qdisc", "add", "dev", veth, "clsact"])?;
        self.clsact.insert(veth.to_owned());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::loss_bytecode;

    #[test]
    fn the_loss_program_matches_the_given_fraction_of_2_pow_32() {
        assert_eq!(
            loss_bytecode(10),
            "4,32 0 0 4294963256,37 1 0 429496729,6 0 0 4294967295,6 0 0 0"
        );
        assert!(loss_bytecode(100).contains(",37 1 0 4294967295,"));
    }
}
