//! The large workload's lines in the human output: one sentence per phase (W4's trial lines
//! stay in the RESULT lines; its summary is shown).

use super::super::report::Line;

/// The human form of one `workload=large` line (empty for W4 trial lines).
pub fn human(l: &Line) -> String {
    let g = |k: &str| l.get(k).unwrap_or("").to_owned();
    match l.get("phase").unwrap_or("") {
        "build" => {
            format!(
            "\nlarge build: {} entries ({} databases) in {} s, {} entries/s over {} connections \
             ({} in flight), errors {}\n",
            g("entries"), g("databases"), g("build_s"), g("entries_per_s"), g("connections"),
            g("in_flight"), g("errors")
        )
        }
        "memory" => format!(
            "large memory ({} entries; nodes {}, leader first): RSS {} MiB (anon {}, file {}; \
             peak {}), {} MiB per million entries; total {} MiB; image {} bytes ({})\n",
            g("entries"),
            g("nodes"),
            g("rss_mib"),
            g("rss_anon_mib"),
            g("rss_file_mib"),
            g("peak_rss_mib"),
            g("rss_mib_per_million"),
            g("rss_total_mib"),
            g("image_bytes"),
            g("image")
        ),
        "restart" => format!(
            "large restart (follower {}): -> serving {} ms, -> caught up {} ms ({} ms per \
             million entries); RSS after the load {} MiB (anon {}, file {})\n",
            g("node"),
            g("restart_to_serving_ms"),
            g("restart_to_caught_up_ms"),
            g("caught_up_ms_per_million"),
            g("rss_after_load_mib"),
            g("rss_anon_after_load_mib"),
            g("rss_file_after_load_mib")
        ),
        "w2-snapshot" => format!(
            "large W2 ({} in flight): {} ops/s with no snapshot ({} s), {} ops/s while the \
             leader snapshots ({} s): ratio {} (target >= 0.8); the leader's snapshot took {} ms \
             ({} seen); {} ops/s while only a follower snapshots\n",
            g("outstanding"),
            g("no_snap_ops_per_s"),
            g("no_snap_s"),
            g("leader_snap_ops_per_s"),
            g("leader_snap_s"),
            g("ratio"),
            g("leader_snapshot_ms"),
            g("leader_snapshots_seen"),
            g("follower_snap_ops_per_s")
        ),
        _ => faults(l),
    }
}

/// W4's summary and the SNAP catch-up.
fn faults(l: &Line) -> String {
    let g = |k: &str| l.get(k).unwrap_or("").to_owned();
    match l.get("phase").unwrap_or("") {
        "w4-empty" | "w4-large" if l.get("trials").is_some() => format!(
            "large {}: {} trials: new leader {} ms, fresh client first write {} ms, existing \
             client unavailable {} ms (max {})\n",
            g("phase"),
            g("trials"),
            g("mean_new_leader_ms"),
            g("mean_fresh_client_first_write_ms"),
            g("mean_unavail_ms"),
            g("max_unavail_ms")
        ),
        "snap-catchup" => format!(
            "large SNAP catch-up: {} writes of {} B while follower {} was down; sync {}; \
             restart -> serving {} ms, -> caught up {} ms ({} ms per million entries); its RSS \
             then {} MiB, 2 s later {} MiB (peak {} MiB)\n",
            g("writes"),
            g("value_bytes"),
            g("follower"),
            g("sync"),
            g("restart_to_serving_ms"),
            g("restart_to_caught_up_ms"),
            g("caught_up_ms_per_million"),
            g("rss_after_mib"),
            g("rss_settled_mib"),
            g("peak_rss_mib")
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_has_a_sentence_and_w4_trials_none() {
        let mut l = Line::new("large", "ens");
        l.set("phase", "w2-snapshot").set("ratio", "0.91");
        assert!(human(&l).contains("ratio 0.91 (target >= 0.8)"));
        let mut t = Line::new("large", "ens");
        t.set("trial", 1).set("phase", "w4-large");
        assert_eq!(human(&t), "");
        t.set("trials", 3);
        assert!(human(&t).starts_with("large w4-large: 3 trials"));
    }
}
