//! Reads the control paragraph of a `.deb`: an `ar` archive whose
//! `control.tar[.gz|.xz]` member holds `./control` (deb(5)).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// One deb822 paragraph, fields in their original order. A value keeps its
/// continuation lines (each starting with a space) verbatim.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Control {
    pub fields: Vec<(String, String)>,
}

impl Control {
    /// The field's value (field names are case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn parse(text: &str) -> Result<Self> {
        let mut fields: Vec<(String, String)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                if fields.is_empty() {
                    continue;
                }
                // A control file holds one paragraph; anything after is junk.
                if text.lines().skip(n).any(|l| !l.trim().is_empty()) {
                    bail!("line {}: more than one paragraph", n + 1);
                }
                break;
            }
            if line.starts_with([' ', '\t']) {
                let Some((_, value)) = fields.last_mut() else {
                    bail!("line {}: continuation line before any field", n + 1);
                };
                value.push('\n');
                value.push_str(line);
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                bail!("line {}: expected `Field: value`", n + 1);
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_graphic()) {
                bail!("line {}: bad field name {name:?}", n + 1);
            }
            fields.push((name.to_string(), value.trim().to_string()));
        }
        let control = Control { fields };
        for required in ["Package", "Version", "Architecture"] {
            if control.get(required).is_none_or(str::is_empty) {
                bail!("no {required} field");
            }
        }
        let name = control.get("Package").unwrap_or_default();
        let valid_name = name.len() >= 2
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
        if !valid_name {
            bail!("Package {name:?} is not a valid Debian package name");
        }
        for field in ["Version", "Architecture"] {
            let value = control.get(field).unwrap_or_default();
            if value.contains(['/', ' ', '\n']) {
                bail!("{field} {value:?} is not valid");
            }
        }
        Ok(control)
    }
}

/// Reads and parses the control file of the `.deb` at `path`.
pub fn read_control(path: &Path) -> Result<Control> {
    let text = File::open(path)
        .map_err(anyhow::Error::from)
        .and_then(|file| control_text(BufReader::new(file)))
        .with_context(|| format!("{}: not a readable .deb", path.display()))?;
    Control::parse(&text).with_context(|| format!("{}: control file", path.display()))
}

/// The control file's text of the `.deb` `deb` holds.
pub fn control_text(deb: impl Read) -> Result<String> {
    let mut archive = ar::Archive::new(deb);
    let mut first = true;
    while let Some(entry) = archive.next_entry() {
        let entry = entry?;
        let name = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        if first && name != "debian-binary" {
            bail!("first member is {name:?}, not debian-binary");
        }
        first = false;
        let tar: Box<dyn Read + '_> = match name.as_str() {
            "control.tar" => Box::new(entry),
            "control.tar.gz" => Box::new(flate2::read::GzDecoder::new(entry)),
            "control.tar.xz" => Box::new(xz2::read::XzDecoder::new(entry)),
            "debian-binary" => continue,
            other if other.starts_with("control.tar") => bail!("unsupported member {other}"),
            _ => continue,
        };
        return control_from_tar(tar);
    }
    bail!("no control.tar member")
}

fn control_from_tar(tar: impl Read) -> Result<String> {
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        if path == Path::new("./control") || path == Path::new("control") {
            let mut text = String::new();
            entry
                .read_to_string(&mut text)
                .map_err(|e| io::Error::new(e.kind(), format!("control: {e}")))?;
            return Ok(text);
        }
    }
    bail!("control.tar has no ./control")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_continuations_are_kept() {
        let text = "Package: kubelet\nVersion: 1.31.2-1\nArchitecture: amd64\n\
                    Depends: iptables (>= 1.4.21),\n util-linux\n\
                    Description: node agent\n Runs pods.\n .\n More.\n";
        let c = Control::parse(text).unwrap();
        assert_eq!(c.get("package"), Some("kubelet"));
        assert_eq!(c.get("Depends"), Some("iptables (>= 1.4.21),\n util-linux"));
        assert_eq!(
            c.get("Description"),
            Some("node agent\n Runs pods.\n .\n More.")
        );
        assert_eq!(c.fields.len(), 5);
    }

    #[test]
    fn missing_and_bad_fields_are_refused() {
        let no_version = Control::parse("Package: a1\nArchitecture: all\n").unwrap_err();
        assert_eq!(no_version.to_string(), "no Version field");
        let bad_name =
            Control::parse("Package: ../x\nVersion: 1\nArchitecture: all\n").unwrap_err();
        assert!(bad_name.to_string().contains("not a valid"), "{bad_name}");
        let junk = Control::parse("Package: a1\nVersion: 1\nArchitecture: all\n\nPackage: b\n");
        assert!(junk
            .unwrap_err()
            .to_string()
            .contains("more than one paragraph"));
    }
}
