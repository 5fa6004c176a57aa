//! The dependency-closure gate: before anything is published, every
//! dependency of every package a channel would serve must be met inside
//! that channel (by a package's name or what it provides, at a version the
//! constraint accepts) or name a distribution package that
//! `pkg/families.toml` declares (`distribution = [...]` per family: what the
//! host's own repositories supply, such as iptables or conntrack).
//!
//! A channel is what one client source sees: the apt suite for one
//! architecture (its packages and the `all` ones), and one architecture's
//! dnf/yum directory (its rpms and the `noarch` ones). A channel whose
//! `apt-get install kubeadm` or `dnf install kubeadm` would stop at an
//! unmet dependency is refused with one line naming the package, the
//! dependency and the channel, before the repository is touched.
//!
//! Versions compare as each family's package manager compares them:
//! `debversion` (dpkg's algorithm) and `rpm-version` (rpm's `rpmvercmp`, the
//! crate the `rpm` crate uses). Debian relation fields (deb-control(5):
//! `a (>= 1) | b, c`) and rpm's rich `(a or b)` dependencies are split here;
//! other rich operators (`and`, `if`, `with`, `unless`) are refused as
//! unchecked rather than waved through.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rpm::{DependencyFlags, PackageMetadata};
use serde::{Deserialize, Serialize};

use super::debfile;
use crate::spec::Family;

/// One package as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pkg {
    pub name: String,
    pub version: String,
    /// deb: `Architecture`; rpm: the header's arch (`noarch` included).
    pub arch: String,
    /// What it provides besides itself: (name, exact version if any).
    pub provides: Vec<(String, Option<String>)>,
    /// Files it ships (rpm file dependencies are met by them).
    pub files: BTreeSet<String>,
    /// Every dependency: alternatives, any one of which meets it.
    pub depends: Vec<Requirement>,
}

/// A dependency as written (`raw`, for messages) and its alternatives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Requirement {
    pub raw: String,
    pub alternatives: Vec<Relation>,
}

/// `name` with an optional `(operator, version)`; operators are written
/// `<`, `<=`, `=`, `>=`, `>` for both families.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Relation {
    pub name: String,
    pub constraint: Option<(String, String)>,
}

/// The packages one channel serves.
pub struct Channel<'a> {
    /// How the operator finds it in REPO_DIR: `dists/stable (amd64)`, `x86_64/`.
    pub label: String,
    pub family: Family,
    pub packages: Vec<&'a Pkg>,
}

/// Refuses the first channel with an unmet dependency, as one line:
/// `PACKAGE VERSION depends on DEP, which channel LABEL does not provide ...`.
pub fn check(channels: &[Channel], distribution: &dyn Fn(Family) -> Vec<String>) -> Result<()> {
    for channel in channels {
        let declared: BTreeSet<String> = distribution(channel.family).into_iter().collect();
        // Candidates by the names they answer to, and every file shipped:
        // a channel of a few hundred releases is checked in linear time.
        let mut by_name: BTreeMap<&str, Vec<&Pkg>> = BTreeMap::new();
        let mut files: BTreeSet<&str> = BTreeSet::new();
        for p in &channel.packages {
            by_name.entry(&p.name).or_default().push(p);
            for (name, _) in &p.provides {
                by_name.entry(name).or_default().push(p);
            }
            files.extend(p.files.iter().map(String::as_str));
        }
        for pkg in &channel.packages {
            for req in &pkg.depends {
                let met = req.alternatives.iter().any(|rel| {
                    declared.contains(&rel.name)
                        || if channel.family == Family::Rpm && rel.name.starts_with('/') {
                            files.contains(rel.name.as_str())
                        } else {
                            by_name.get(rel.name.as_str()).is_some_and(|candidates| {
                                candidates.iter().any(|p| satisfies(channel.family, p, rel))
                            })
                        }
                });
                if !met {
                    bail!(
                        "refusing to publish: {} {} ({}) depends on {}, which channel {} does not hold and pkg/families.toml does not declare as a {} distribution package",
                        pkg.name,
                        pkg.version,
                        pkg.arch,
                        req.raw,
                        channel.label,
                        channel.family.name()
                    );
                }
            }
        }
    }
    Ok(())
}

/// True when `pkg` meets `rel`: by its own name and version, by one of its
/// provides, or (rpm) by shipping the file `rel` names.
fn satisfies(family: Family, pkg: &Pkg, rel: &Relation) -> bool {
    if family == Family::Rpm && rel.name.starts_with('/') {
        return pkg.files.contains(&rel.name);
    }
    if pkg.name == rel.name && version_ok(family, Some(&pkg.version), rel) {
        return true;
    }
    pkg.provides
        .iter()
        .any(|(name, version)| *name == rel.name && version_ok(family, version.as_deref(), rel))
}

/// Whether `provided` (None: a provide without version) meets the constraint.
fn version_ok(family: Family, provided: Option<&str>, rel: &Relation) -> bool {
    let Some((op, wanted)) = &rel.constraint else {
        return true;
    };
    // An unversioned provide meets no versioned dependency (dpkg's rule,
    // and rpm's in practice for our packages).
    let Some(provided) = provided else {
        return false;
    };
    let order = match family {
        Family::Deb => {
            let (Ok(a), Ok(b)) = (
                provided.parse::<debversion::Version>(),
                wanted.parse::<debversion::Version>(),
            ) else {
                return false;
            };
            a.cmp(&b)
        }
        Family::Rpm => rpm_compare(provided, wanted),
    };
    match op.as_str() {
        "<" => order == Ordering::Less,
        "<=" => order != Ordering::Greater,
        "=" => order == Ordering::Equal,
        ">=" => order != Ordering::Less,
        ">" => order == Ordering::Greater,
        _ => false,
    }
}

/// rpm compares only what the dependency names: `>= 1.2.0` ignores the
/// provider's release, and an absent epoch is 0.
fn rpm_compare(provided: &str, wanted: &str) -> Ordering {
    let p = rpm_version::Evr::parse(provided);
    let w = rpm_version::Evr::parse(wanted);
    let p = if w.release().is_empty() {
        rpm_version::Evr::new(p.epoch(), p.version(), "")
    } else {
        p
    };
    p.cmp(&w)
}

/// A Debian relation field (`Depends`, `Pre-Depends`, `Provides`): groups
/// separated by `,`, alternatives by `|`, each `name[:arch] [(op version)]
/// [[arches]] [<profiles>]`.
pub fn parse_deb_relations(field: &str) -> Result<Vec<Requirement>> {
    let mut out = Vec::new();
    for group in field.split(',') {
        let group = group.split_whitespace().collect::<Vec<_>>().join(" ");
        if group.is_empty() {
            continue;
        }
        let mut alternatives = Vec::new();
        for alt in group.split('|') {
            alternatives
                .push(parse_deb_relation(alt.trim()).with_context(|| format!("{group:?}"))?);
        }
        out.push(Requirement {
            raw: group,
            alternatives,
        });
    }
    Ok(out)
}

fn parse_deb_relation(text: &str) -> Result<Relation> {
    // Architecture restrictions and build profiles do not apply to binary
    // packages' fields; drop them.
    let text = text.split(['[', '<']).next().unwrap_or_default().trim();
    let (name, rest) = match text.split_once('(') {
        Some((n, r)) => (n.trim(), Some(r)),
        None => (text, None),
    };
    let name = name.split(':').next().unwrap_or_default();
    if name.is_empty() || name.contains(char::is_whitespace) {
        bail!("not a package relation");
    }
    let constraint = match rest {
        None => None,
        Some(rest) => {
            let inner = rest
                .strip_suffix(')')
                .context("unclosed version constraint")?
                .trim();
            let (op, version) = ["<<", ">>", "<=", ">=", "=", "<", ">"]
                .iter()
                .find_map(|op| inner.strip_prefix(op).map(|v| (*op, v.trim())))
                .context("no version operator")?;
            // `<` and `>` are dpkg's obsolete spellings of `<=` and `>=`.
            let op = match op {
                "<<" => "<",
                ">>" => ">",
                "<" => "<=",
                ">" => ">=",
                o => o,
            };
            if version.is_empty() {
                bail!("no version");
            }
            Some((op.to_string(), version.to_string()))
        }
    };
    Ok(Relation {
        name: name.to_string(),
        constraint,
    })
}

/// One rpm dependency: `name [op version]`, or a rich `(a or b)` whose
/// alternatives are plain dependencies.
fn rpm_requirement(dep: &rpm::Dependency) -> Result<Requirement> {
    let raw = if dep.version.is_empty() {
        dep.name.clone()
    } else {
        format!("{} {} {}", dep.name, rpm_op(dep.flags), dep.version)
    };
    let alternatives = if let Some(inner) =
        dep.name.strip_prefix('(').and_then(|s| s.strip_suffix(')'))
    {
        let words: Vec<&str> = inner.split_whitespace().collect();
        let mut alts = Vec::new();
        for alt in words.split(|w| *w == "or") {
            match alt {
                [name] if !name.starts_with('(') => alts.push(Relation {
                    name: name.to_string(),
                    constraint: None,
                }),
                [name, op, version] if ["<", "<=", "=", ">=", ">"].contains(op) => {
                    alts.push(Relation {
                        name: name.to_string(),
                        constraint: Some((op.to_string(), version.to_string())),
                    })
                }
                _ => bail!(
                    "rich dependency {raw:?}: only `(a or b ...)` of plain dependencies can be checked"
                ),
            }
        }
        alts
    } else {
        let constraint =
            (!dep.version.is_empty()).then(|| (rpm_op(dep.flags).to_string(), dep.version.clone()));
        vec![Relation {
            name: dep.name.clone(),
            constraint,
        }]
    };
    Ok(Requirement { raw, alternatives })
}

fn rpm_op(flags: DependencyFlags) -> &'static str {
    let less = flags.contains(DependencyFlags::LESS);
    let greater = flags.contains(DependencyFlags::GREATER);
    let equal = flags.contains(DependencyFlags::EQUAL);
    match (less, greater, equal) {
        (true, false, false) => "<",
        (true, false, true) => "<=",
        (false, true, false) => ">",
        (false, true, true) => ">=",
        _ => "=",
    }
}

/// A `.deb`'s name, version, provides and Depends/Pre-Depends (Recommends
/// and Suggests never stop an install).
pub fn read_deb(path: &Path) -> Result<Pkg> {
    deb_pkg(path, &debfile::read_control(path)?)
}

/// [`read_deb`] from a control paragraph already read.
pub fn deb_pkg(path: &Path, control: &debfile::Control) -> Result<Pkg> {
    let field = |name| control.get(name).unwrap_or_default();
    let mut depends = parse_deb_relations(field("Pre-Depends"))
        .with_context(|| format!("{}: Pre-Depends", path.display()))?;
    depends.extend(
        parse_deb_relations(field("Depends"))
            .with_context(|| format!("{}: Depends", path.display()))?,
    );
    let mut provides = Vec::new();
    for req in parse_deb_relations(field("Provides"))
        .with_context(|| format!("{}: Provides", path.display()))?
    {
        for rel in req.alternatives {
            provides.push((rel.name, rel.constraint.map(|(_, v)| v)));
        }
    }
    Ok(Pkg {
        name: field("Package").to_string(),
        version: field("Version").to_string(),
        arch: field("Architecture").to_string(),
        provides,
        files: BTreeSet::new(),
        depends,
    })
}

/// An rpm's name, EVR, provides, files and Requires (but `rpmlib(...)`,
/// which rpm itself meets).
pub fn read_rpm(path: &Path) -> Result<Pkg> {
    let meta = super::rpmfile::read(path)?;
    rpm_pkg(path, &meta)
}

/// [`read_rpm`] from a header already read.
pub fn rpm_pkg(path: &Path, meta: &PackageMetadata) -> Result<Pkg> {
    let what = || format!("{}: not a readable rpm", path.display());
    let epoch = meta.get_epoch().unwrap_or(0);
    let version = format!(
        "{}{}-{}",
        if epoch > 0 {
            format!("{epoch}:")
        } else {
            String::new()
        },
        meta.get_version().with_context(what)?,
        meta.get_release().with_context(what)?
    );
    let provides = meta
        .get_provides()
        .with_context(what)?
        .into_iter()
        .map(|d| (d.name, (!d.version.is_empty()).then_some(d.version)))
        .collect();
    let files = meta
        .get_file_paths()
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut depends = Vec::new();
    for dep in meta.get_requires().with_context(what)? {
        if dep.flags.contains(DependencyFlags::RPMLIB) || dep.name.starts_with("rpmlib(") {
            continue;
        }
        depends.push(rpm_requirement(&dep).with_context(|| format!("{}", path.display()))?);
    }
    depends.sort();
    depends.dedup();
    Ok(Pkg {
        name: meta.get_name().with_context(what)?.to_string(),
        version,
        arch: meta.get_arch().with_context(what)?.to_string(),
        provides,
        files,
        depends,
    })
}

/// Reads every path, keeping one entry per (name, version, arch): a file
/// already in the repository and the same package added again are one.
pub fn read_all(family: Family, paths: &[PathBuf]) -> Result<Vec<Pkg>> {
    let mut pkgs = Vec::new();
    for path in paths {
        pkgs.push(match family {
            Family::Deb => read_deb(path)?,
            Family::Rpm => read_rpm(path)?,
        });
    }
    Ok(dedup(pkgs))
}

/// One entry per (name, version, arch), sorted.
pub fn dedup(mut pkgs: Vec<Pkg>) -> Vec<Pkg> {
    pkgs.sort();
    pkgs.dedup_by(|a, b| (&a.name, &a.version, &a.arch) == (&b.name, &b.version, &b.arch));
    pkgs
}

/// The apt channels: one per architecture the suite covers; `prefix` is
/// where the tree lies in the repository (`v1.34/deb/`, or "").
pub fn deb_channels<'a>(prefix: &str, suite: &str, debs: &'a [Pkg]) -> Vec<Channel<'a>> {
    let arches: BTreeSet<&str> = debs
        .iter()
        .map(|p| p.arch.as_str())
        .filter(|a| *a != "all")
        .collect();
    arches
        .into_iter()
        .map(|arch| Channel {
            label: format!("{prefix}dists/{suite} ({arch})"),
            family: Family::Deb,
            packages: debs
                .iter()
                .filter(|p| p.arch == arch || p.arch == "all")
                .collect(),
        })
        .collect()
}

/// The dnf/yum channels: one per architecture directory.
pub fn rpm_channels<'a>(prefix: &str, rpms: &'a [Pkg]) -> Vec<Channel<'a>> {
    let arches: BTreeSet<&str> = rpms
        .iter()
        .map(|p| p.arch.as_str())
        .filter(|a| *a != "noarch")
        .collect();
    arches
        .into_iter()
        .map(|arch| Channel {
            label: format!("{prefix}{arch}/"),
            family: Family::Rpm,
            packages: rpms
                .iter()
                .filter(|p| p.arch == arch || p.arch == "noarch")
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, version: &str, provides: &[(&str, Option<&str>)], deps: &str) -> Pkg {
        Pkg {
            name: name.into(),
            version: version.into(),
            arch: "amd64".into(),
            provides: provides
                .iter()
                .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
                .collect(),
            files: BTreeSet::new(),
            depends: parse_deb_relations(deps).unwrap(),
        }
    }

    fn run(family: Family, pkgs: &[Pkg], distribution: &[&str]) -> Result<()> {
        let d: Vec<String> = distribution.iter().map(|s| s.to_string()).collect();
        let channel = Channel {
            label: "dists/stable (amd64)".into(),
            family,
            packages: pkgs.iter().collect(),
        };
        check(&[channel], &|_| d.clone())
    }

    #[test]
    fn deb_relations_parse() {
        let reqs = parse_deb_relations(
            "iptables (>= 1.4.21), kubernetes-cni (>> 1.2.0) | foo:any, bar [amd64],\n mount",
        )
        .unwrap();
        assert_eq!(reqs.len(), 4);
        assert_eq!(reqs[0].raw, "iptables (>= 1.4.21)");
        assert_eq!(
            reqs[1].alternatives,
            vec![
                Relation {
                    name: "kubernetes-cni".into(),
                    constraint: Some((">".into(), "1.2.0".into()))
                },
                Relation {
                    name: "foo".into(),
                    constraint: None
                },
            ]
        );
        assert_eq!(reqs[2].alternatives[0].name, "bar");
        assert_eq!(reqs[3].alternatives[0].name, "mount");
        assert!(parse_deb_relations("a (>= 1").is_err());
    }

    #[test]
    fn a_closed_channel_passes() {
        let pkgs = [
            pkg(
                "kubelet",
                "1.34.2-2",
                &[],
                "iptables (>= 1.4.21), kubernetes-cni (>= 1.2.0)",
            ),
            pkg("kubernetes-cni", "1.7.1-2", &[], ""),
            pkg(
                "kubeadm",
                "1.34.2-2",
                &[],
                "cri (>= 1.30) | cri-tools, conntrack",
            ),
            pkg("crictl", "1.34.0-2", &[("cri", Some("1.34.0"))], ""),
        ];
        run(Family::Deb, &pkgs, &["iptables", "conntrack"]).unwrap();
    }

    #[test]
    fn a_missing_package_is_named_with_the_channel() {
        let pkgs = [pkg(
            "kubelet",
            "1.34.2-2",
            &[],
            "iptables (>= 1.4.21), kubernetes-cni (>= 1.2.0)",
        )];
        let err = run(Family::Deb, &pkgs, &["iptables"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "refusing to publish: kubelet 1.34.2-2 (amd64) depends on kubernetes-cni (>= 1.2.0), which channel dists/stable (amd64) does not hold and pkg/families.toml does not declare as a deb distribution package"
        );
    }

    #[test]
    fn a_version_not_present_is_refused() {
        let pkgs = [
            pkg("kubeadm", "1.34.2-2", &[], "cri-tools (>= 1.35.0)"),
            pkg("cri-tools", "1.34.0-2", &[], ""),
        ];
        let err = run(Family::Deb, &pkgs, &[]).unwrap_err().to_string();
        assert!(
            err.contains("kubeadm 1.34.2-2 (amd64) depends on cri-tools (>= 1.35.0)"),
            "{err}"
        );
        // dpkg's ordering, not a string's: 1.34.0~rc1 is below 1.34.0.
        let pkgs = [
            pkg("kubeadm", "1.34.2-2", &[], "cri-tools (>= 1.34.0)"),
            pkg("cri-tools", "1.34.0~rc1-1", &[], ""),
        ];
        assert!(run(Family::Deb, &pkgs, &[]).is_err());
        let pkgs = [
            pkg("kubeadm", "1.34.2-2", &[], "cri-tools (>= 1.9.0)"),
            pkg("cri-tools", "1.34.0-1", &[], ""),
        ];
        run(Family::Deb, &pkgs, &[]).unwrap();
    }

    #[test]
    fn an_unversioned_provide_meets_no_versioned_dependency() {
        let pkgs = [
            pkg("a", "1", &[], "virt (>= 1)"),
            pkg("b", "1", &[("virt", None)], ""),
        ];
        assert!(run(Family::Deb, &pkgs, &[]).is_err());
    }

    #[test]
    fn rpm_versions_compare_as_rpm_does() {
        let rel = |op: &str, v: &str| Relation {
            name: "kubernetes-cni".into(),
            constraint: Some((op.into(), v.into())),
        };
        // No release in the dependency: the provider's is not compared.
        assert!(version_ok(Family::Rpm, Some("1.2.0-2"), &rel("=", "1.2.0")));
        assert!(version_ok(
            Family::Rpm,
            Some("1.7.1-2"),
            &rel(">=", "1.2.0")
        ));
        assert!(!version_ok(Family::Rpm, Some("1.10.0-1"), &rel("<", "1.9")));
        assert!(version_ok(Family::Rpm, Some("1:0.1-1"), &rel(">", "2.0")));
        assert!(!version_ok(
            Family::Rpm,
            Some("1.2.0-1"),
            &rel(">=", "1.2.0-2")
        ));
    }

    #[test]
    fn rpm_rich_or_dependencies_split() {
        let dep = rpm::Dependency::any("(conntrack-tools or conntrack)");
        let req = rpm_requirement(&dep).unwrap();
        let names: Vec<&str> = req.alternatives.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["conntrack-tools", "conntrack"]);
        let dep = rpm::Dependency::any("(iptables >= 1.4.21 or iptables-legacy)");
        let req = rpm_requirement(&dep).unwrap();
        assert_eq!(
            req.alternatives[0].constraint,
            Some((">=".into(), "1.4.21".into()))
        );
        let dep = rpm::Dependency::any("(a if b)");
        assert!(rpm_requirement(&dep).is_err());
    }
}
