//! The figures of the symmetric splits over several runs (ignored by default: about 10 s per
//! run). `PARTITION_REPS=<n>` (default 5) runs each scenario n times and prints min / median /
//! max of each figure as `PARTITION_SUMMARY` lines:
//!
//! ```text
//! PARTITION_REPS=5 cargo test --release -p tests --test process_partition -- --ignored --nocapture
//! ```

use std::time::Duration;

use super::driver::run;
use super::figures::Figures;
use super::splits::isolate;

fn reps() -> usize {
    std::env::var("PARTITION_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

fn summary(name: &str, what: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        return;
    }
    v.sort();
    println!(
        "PARTITION_SUMMARY scenario={name} figure={what} runs={} min_ms={} median_ms={} max_ms={}",
        v.len(),
        v[0].as_millis(),
        v[v.len() / 2].as_millis(),
        v[v.len() - 1].as_millis()
    );
}

fn summarize(name: &str, runs: &[Figures]) {
    let pick = |f: fn(&Figures) -> Option<Duration>| runs.iter().filter_map(f).collect();
    summary(name, "elect", pick(|f| f.elect));
    summary(name, "step_down", pick(|f| f.step_down));
    summary(name, "first_error", pick(|f| f.first_error));
    summary(name, "write_refused", pick(|f| f.write_refused));
    summary(name, "rejoin", pick(|f| Some(f.rejoin)));
    summary(name, "converge", pick(|f| Some(f.converge)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: PARTITION_REPS runs of each split (about 10 s each)"]
async fn partition_figures_repeated() {
    let (mut leader, mut follower, mut five) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps() {
        let Some(f) = run("rep_leader_isolated", 3, |r| isolate(&[r.leader], r)).await else {
            return;
        };
        leader.push(f);
        if let Some(f) = run("rep_follower_isolated", 3, |r| {
            isolate(&[r.followers[0]], r)
        })
        .await
        {
            follower.push(f);
        }
        let split = |r: &super::driver::Roles| isolate(&[r.leader, r.followers[0]], r);
        if let Some(f) = run("rep_split_3_2", 5, split).await {
            five.push(f);
        }
    }
    summarize("leader_isolated", &leader);
    summarize("follower_isolated", &follower);
    summarize("split_3_2", &five);
}
