//! Wall and CPU time of what the bench runs, and the state of the machine.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// One timed run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Seconds of wall time.
    pub wall: f64,
    /// Seconds of CPU time (user + system), children included.
    pub cpu: f64,
}

impl std::ops::Add for Sample {
    type Output = Sample;
    fn add(self, o: Sample) -> Sample {
        Sample {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
        }
    }
}

/// CPU seconds so far: `(this process, its waited-for children)`, from
/// /proc/self/stat (clock ticks).
pub fn cpu_times() -> Result<(f64, f64)> {
    let stat = fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    // Fields after the parenthesised command name; utime is the 14th field
    // of the line, i.e. index 11 after the name.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("/proc/self/stat: no command name")?;
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    if f.len() < 4 {
        bail!("/proc/self/stat: too few fields");
    }
    let tick = clock_tick();
    Ok(((f[0] + f[1]) / tick, (f[2] + f[3]) / tick))
}

fn clock_tick() -> f64 {
    static TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Runs `cmd` to completion with its output appended to `log`; fails,
/// naming the log, unless it succeeds.
pub fn run(cmd: &mut Command, log: &Path) -> Result<Sample> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let err = out.try_clone().context("duplicating a log handle")?;
    let (_, before) = cpu_times()?;
    let started = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let wall = started.elapsed().as_secs_f64();
    let (_, after) = cpu_times()?;
    if !status.success() {
        bail!(
            "{:?} failed ({status}); see {}",
            cmd.get_program(),
            log.display()
        );
    }
    Ok(Sample {
        wall,
        cpu: after - before,
    })
}

/// Times `f` in this process (all its threads).
pub fn in_process<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Sample)> {
    let (before, _) = cpu_times()?;
    let started = Instant::now();
    let value = f()?;
    let wall = started.elapsed().as_secs_f64();
    let (after, _) = cpu_times()?;
    Ok((
        value,
        Sample {
            wall,
            cpu: after - before,
        },
    ))
}

/// The 1-minute load average.
pub fn load() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Minimum and median of `xs` (not empty).
pub fn min_median(xs: &[f64]) -> (f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (v[0], median)
}

/// Runs `cmd` as [`run`] does, for its effect only.
pub fn quiet(cmd: &mut Command, log: &Path) -> Result<()> {
    run(cmd, log).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(min_median(&[3.0, 1.0, 2.0]), (1.0, 2.0));
        assert_eq!(min_median(&[4.0, 1.0, 2.0, 3.0]), (1.0, 2.5));
    }

    #[test]
    fn children_count_toward_cpu() {
        let log = tempfile::NamedTempFile::new().unwrap();
        let s = run(
            Command::new("sh").args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]),
            log.path(),
        )
        .unwrap();
        assert!(s.cpu > 0.0 && s.wall > 0.0, "{s:?}");
    }
}
