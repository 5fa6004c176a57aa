//! The artifact writers: `deb` (cargo-deb as a library, its data archive
//! from `debpack`), `rpm` (the `rpm` crate) and `tarball` (tar + gzip), with
//! the codecs of `codec`. Each reads only staged trees (`crate::stage`) and
//! writes one file through a temp file and a rename.

pub mod codec;
pub mod deb;
pub mod debpack;
pub mod rpm;
pub mod tarball;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::stage::Staged;

/// Who the packages name as their maintainer/packager. A placeholder until
/// the project has a real list; lintian and rpmlint accept it.
pub const MAINTAINER: &str = "kubedist maintainers <kubedist@lists.example.org>";

/// What every artifact shares beyond the staged trees.
pub struct Meta {
    /// The project's home (Cargo.toml's `workspace.package.repository`).
    pub homepage: String,
    /// SOURCE_DATE_EPOCH: every timestamp in every artifact.
    pub epoch: u64,
    /// The codec and level of each format.
    pub codecs: codec::Codecs,
    /// Threads each artifact's encoder may use (the output does not depend
    /// on it).
    pub threads: u32,
    /// The repository root (LICENSE, pkg/scripts/, installer/).
    pub root: PathBuf,
}

impl Meta {
    pub fn license_text(&self) -> Result<Vec<u8>> {
        let path = self.root.join("LICENSE");
        fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// `pkg/scripts/<name>` with its `@NAME@` values filled in.
    pub fn script(&self, name: &str, values: &[(&str, String)]) -> Result<String> {
        let path = self.root.join("pkg/scripts").join(name);
        let mut text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        for (key, value) in values {
            text = text.replace(&format!("@{key}@"), value);
        }
        if let Some(left) = crate::stage::leftover_placeholder(&text) {
            bail!("{}: placeholder @{left}@ has no value", path.display());
        }
        Ok(text)
    }
}

/// What the maintainer scripts of a package work on, as the space-separated
/// `path:mode` words of pkg/scripts/.
pub struct ScriptValues {
    pub dirs: String,
    pub units: String,
    /// "yes" when the package ships systemd units or drop-ins.
    pub reload: &'static str,
}

impl ScriptValues {
    pub fn new(pkg: &Staged, unitdir: &str) -> ScriptValues {
        let under_unitdir = pkg.package_files().any(|f| {
            f.dest
                .starts_with(&format!("{}/", unitdir.trim_end_matches('/')))
        });
        ScriptValues {
            dirs: pkg
                .dirs
                .iter()
                .map(|d| format!("{}:{:04o}", d.path, d.mode))
                .collect::<Vec<_>>()
                .join(" "),
            units: pkg.systemd_units.join(" "),
            reload: if under_unitdir { "yes" } else { "no" },
        }
    }

    pub fn needed(&self) -> bool {
        !self.dirs.is_empty() || !self.units.is_empty() || self.reload == "yes"
    }
}

/// Writes `out` by handing `write` a temp file beside it, then renaming.
/// On error the temp file is removed and `out` is untouched.
pub fn write_atomic(out: &Path, write: impl FnOnce(&mut fs::File) -> Result<()>) -> Result<()> {
    let tmp = temp_path(out)?;
    let result = (|| {
        let mut file =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        write(&mut file)?;
        file.flush()
            .and_then(|_| file.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        set_mode(&tmp, 0o644)?;
        fs::rename(&tmp, out)
            .with_context(|| format!("renaming {} to {}", tmp.display(), out.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `.<name>.tmp` beside `path`.
pub fn temp_path(path: &Path) -> Result<PathBuf> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    Ok(dir.join(format!(".{}.tmp", name.to_string_lossy())))
}

pub fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

/// `Tue, 14 Nov 2023 22:13:20 +0000` (RFC 2822, as Debian changelogs want).
pub fn rfc2822(epoch: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = epoch / 86_400;
    let secs = epoch % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01, after
/// Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// One line of both formats' changelogs.
pub fn changelog_line(pkg: &Staged) -> String {
    format!(
        "{} {} packaged by kubedist (package revision {}).",
        pkg.version_from,
        pkg.upstream_version.replace('~', "-"),
        pkg.revision
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_render_like_debian_changelogs() {
        assert_eq!(rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc2822(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 +0000");
        assert_eq!(rfc2822(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }
}
