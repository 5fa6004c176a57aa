//! Running jobs of uneven size on a few CPUs: how many at once, how many
//! encoder threads each, in which order, and the worker pool. `dist` writes
//! its artifacts with it and `bench` measures the codec floor the same way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Result};

/// The order jobs start in: single-threaded ones first, so that the last to
/// finish are multithreaded and keep every CPU busy to the end; then biggest
/// first, so that the long ones start early and small ones fill in.
pub fn start_order(single_threaded: bool, size: u64) -> impl Ord {
    (std::cmp::Reverse(single_threaded), std::cmp::Reverse(size))
}

/// How many of `jobs` to run at once (`requested`, else one per CPU) and how
/// many threads each encoder gets: its share of the CPUs, and at least two
/// where there are two CPUs, so that while one job is in a serial phase
/// (reading, framing, digests) another's encoder can use the idle CPU.
/// Thread counts change no byte of the output (see emit::codec).
pub fn workers(cpus: usize, jobs: usize, requested: Option<usize>) -> (usize, u32) {
    let cpus = cpus.max(1);
    let workers = requested.unwrap_or(cpus).clamp(1, jobs.max(1));
    let threads = (cpus / workers).max(cpus.min(2));
    (workers, threads as u32)
}

/// Runs `work` on each of `jobs` on `workers` threads and returns the
/// results in the order of `jobs`; after the first failure no new job
/// starts, and that failure is returned.
pub fn run<J: Sync, T: Send>(
    jobs: &[J],
    workers: usize,
    work: &(dyn Fn(&J) -> Result<T> + Sync),
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                if failed.load(Ordering::SeqCst) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { return };
                let result = work(job);
                if result.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                if let Ok(mut r) = results.lock() {
                    r.push((i, result));
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker panicked"))?;
    if results.len() < jobs.len() && !failed.load(Ordering::SeqCst) {
        bail!("a worker panicked");
    }
    // In the order of `jobs`, whichever finished first.
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cpus_give_each_of_two_jobs_two_threads() {
        assert_eq!(workers(2, 10, None), (2, 2));
        assert_eq!(workers(8, 2, None), (2, 4));
        assert_eq!(workers(4, 10, Some(1)), (1, 4));
        assert_eq!(workers(1, 0, None), (1, 1));
    }

    #[test]
    fn results_come_in_the_jobs_order_and_a_failure_stops_the_run() {
        let squares = run(&[3u64, 1, 2], 2, &|n| Ok(n * n)).unwrap();
        assert_eq!(squares, [9, 1, 4]);
        let err = run(&[1u64, 0, 2], 1, &|n| {
            if *n == 0 {
                bail!("zero")
            }
            Ok(*n)
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "zero");
    }
}
