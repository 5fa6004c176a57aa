//! Upstream versions as their tags spell them (`1.37.2`, `1.38.0-beta.0`,
//! runc's `1.6.0-rc.1`): read once, ordered as releases are (a
//! pre-release before its release, `alpha` < `beta` < `rc`, numbers by
//! value: semver's precedence), and spelled for packages so that dpkg and
//! rpm order them the same way (`package_spelling`): `1.38.0~beta.0`, the
//! `~` sorting before the end of the string in both.

use std::cmp::Ordering;
use std::fmt;

use anyhow::Result;

/// `X.Y.Z` or `X.Y.Z-<pre-release>`, the pre-release dot-separated letters
/// and digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    core: [u64; 3],
    /// The pre-release's identifiers (`["beta", "0"]`); empty for a release.
    pre: Vec<String>,
}

impl Version {
    /// Reads `1.37.2` or `1.38.0-rc.1`; anything else is refused in one line.
    pub fn parse(text: &str) -> Result<Version> {
        let bad = || anyhow::anyhow!("{text:?}: not a version like 1.37.2 or 1.38.0-rc.1");
        let (core, pre) = match text.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (text, None),
        };
        let numbers: Vec<&str> = core.split('.').collect();
        let [x, y, z] = numbers.as_slice() else {
            return Err(bad());
        };
        let number = |n: &str| -> Result<u64> {
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.len() > 18 {
                return Err(bad());
            }
            Ok(n.parse()?)
        };
        let core = [number(x)?, number(y)?, number(z)?];
        let pre = match pre {
            None => Vec::new(),
            Some(p) => {
                let ids: Vec<String> = p.split('.').map(str::to_string).collect();
                let plain = |id: &String| {
                    !id.is_empty()
                        && id.len() <= 18
                        && id.bytes().all(|b| b.is_ascii_alphanumeric())
                };
                if !ids.iter().all(plain) {
                    return Err(bad());
                }
                ids
            }
        };
        Ok(Version { core, pre })
    }

    /// Whether `text` reads as a version.
    pub fn is_valid(text: &str) -> bool {
        Version::parse(text).is_ok()
    }

    /// `X.Y`, the minor its channel is named after.
    pub fn minor(&self) -> String {
        format!("{}.{}", self.core[0], self.core[1])
    }

    /// `(X, Y)`, to order minors.
    pub fn minor_key(&self) -> (u64, u64) {
        (self.core[0], self.core[1])
    }

    /// An alpha, beta or rc (any version with a pre-release part).
    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }
}

/// A version (`Version::is_valid`) as deb and rpm spell it: the
/// pre-release's `-` turned into `~`.
pub fn package_spelling(version: &str) -> String {
    version.replacen('-', "~", 1)
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.core;
        write!(f, "{x}.{y}.{z}")?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        Ok(())
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.core.cmp(&other.core).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                // The release after its pre-releases.
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => cmp_pre(&self.pre, &other.pre),
            }
        })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// semver's rule: identifier by identifier, numbers by value and before
/// words, words in ASCII order; a shorter list that is a prefix first.
fn cmp_pre(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(m), Ok(n)) => m.cmp(&n),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => x.cmp(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_refused() {
        for good in ["1.34.2", "1.35.0-rc.1", "1.35.0-alpha.0", "3.7.0"] {
            assert_eq!(Version::parse(good).unwrap().to_string(), good);
        }
        for bad in [
            "1.34",
            "v1.34.2",
            "1.34.2-",
            "1.34.2/../x",
            "1.34.x",
            "1.34.2-rc 1",
            "1.34.2-rc..1",
            "1.2.3.4",
        ] {
            let err = Version::parse(bad).unwrap_err().to_string();
            assert!(err.contains("not a version"), "{bad}: {err}");
        }
    }

    #[test]
    fn pre_releases_come_before_their_release_and_are_spelled_with_a_tilde() {
        let v = |s: &str| Version::parse(s).unwrap();
        let ordered = [
            "1.37.2",
            "1.38.0-alpha.1",
            "1.38.0-alpha.2",
            "1.38.0-alpha.10",
            "1.38.0-beta.0",
            "1.38.0-rc.0",
            "1.38.0-rc.1",
            "1.38.0",
            "1.38.1",
            "1.39.0",
        ];
        for w in ordered.windows(2) {
            assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(package_spelling("1.38.0-beta.0"), "1.38.0~beta.0");
        assert_eq!(package_spelling("1.38.0"), "1.38.0");
        assert_eq!(v("1.38.0-rc.1").minor(), "1.38");
        assert!(v("1.38.0-rc.1").is_prerelease() && !v("1.38.0").is_prerelease());
    }

    /// Whether `tool` runs here; under CI=true a missing tool fails the
    /// test instead.
    fn have(tool: &str) -> bool {
        let found = crate::util::on_path(tool);
        assert!(
            found || std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is not installed (ci/install-deps installs it)"
        );
        found
    }

    /// dpkg's and rpm's own order of `a` and `b`, package versions
    /// (`1.38.0~beta.0-2`): `-1`, `0` or `1`.
    fn dpkg_cmp(a: &str, b: &str) -> i32 {
        let run = |op: &str| {
            std::process::Command::new("dpkg")
                .args(["--compare-versions", a, op, b])
                .status()
                .unwrap()
                .success()
        };
        if run("lt") {
            -1
        } else if run("eq") {
            0
        } else {
            1
        }
    }

    /// rpm.vercmp of each pair, in one rpm run.
    fn rpm_cmp(pairs: &[(String, String)]) -> Vec<i32> {
        let calls: String = pairs
            .iter()
            .map(|(a, b)| format!("print(rpm.vercmp('{a}', '{b}') .. ' ') "))
            .collect();
        let out = std::process::Command::new("rpm")
            .arg("--eval")
            .arg(format!("%{{lua: {calls}}}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    }

    use proptest::prelude::*;

    /// Versions as Kubernetes tags them: `X.Y.Z` or `X.Y.Z-(alpha|beta|rc).N`.
    fn kubernetes_version() -> impl Strategy<Value = String> {
        let pre = prop_oneof![
            Just(String::new()),
            (prop::sample::select(vec!["alpha", "beta", "rc"]), 0u64..12)
                .prop_map(|(k, n)| format!("-{k}.{n}")),
        ];
        (1u64..2, 36u64..40, 0u64..3, pre).prop_map(|(x, y, z, p)| format!("{x}.{y}.{z}{p}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Every package version kubedist writes (`Version::package` and a
        /// revision) is ordered by dpkg and by rpm as the releases are:
        /// a node on a pre-release upgrades to the release, and a new
        /// revision to it, by the normal path.
        #[test]
        fn dpkg_and_rpm_order_package_versions_as_the_releases(
            picks in prop::collection::vec((kubernetes_version(), 1u32..12), 2..10)
        ) {
            if !(have("dpkg") && have("rpm")) {
                return Ok(());
            }
            let mut versions: Vec<(Version, u32)> = picks
                .iter()
                .map(|(v, r)| (Version::parse(v).unwrap(), *r))
                .collect();
            versions.sort();
            versions.dedup();
            let spelled: Vec<String> = versions
                .iter()
                .map(|(v, r)| format!("{}-{r}", package_spelling(&v.to_string())))
                .collect();
            // Sorted by our order: each is below the next for dpkg and rpm,
            // whose orders are total, so they agree on every pair.
            let pairs: Vec<(String, String)> = spelled
                .windows(2)
                .map(|w| (w[0].clone(), w[1].clone()))
                .collect();
            for (a, b) in &pairs {
                prop_assert_eq!(dpkg_cmp(a, b), -1, "dpkg: {} < {}", a, b);
            }
            for ((a, b), order) in pairs.iter().zip(rpm_cmp(&pairs)) {
                prop_assert_eq!(order, -1, "rpm: {} < {}", a, b);
            }
        }
    }
}
