//! The emitters in-process: the real `pkg/` staged with small stand-in
//! binaries into a temp dir, each format written and read back with the
//! same libraries a user's tools rest on (`ar`, `tar`, the `rpm` crate,
//! `backhand`'s squashfs reader, and `unsquashfs` where it is installed).
//! No root, no chroot: seconds. The install suites (ci/t-*.sh) run the
//! real package managers on the same artifacts.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Result;
use md5::{Digest, Md5};
use sha2::Sha256;

use super::codec::Codecs;
use super::Options;
use crate::spec::{Arch, Family, Spec, SysextOs};
use crate::stage::{self, Programs, Staged, StagedArch};
use crate::util::hex;

const EPOCH: u64 = 1_700_000_000;

/// Small files in place of the upstream and built binaries.
struct FakePrograms {
    dir: PathBuf,
}

impl FakePrograms {
    fn file(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.join(name);
        fs::write(&path, body).unwrap();
        path
    }
}

impl Programs for FakePrograms {
    fn upstream(&self, source: &str, member: &str) -> Result<Vec<(String, PathBuf)>> {
        Ok(if member == "*" {
            ["bridge", "loopback"]
                .iter()
                .map(|n| (n.to_string(), self.file(n, &format!("plugin {n}\n"))))
                .collect()
        } else {
            let name = format!("{source}-{member}").replace('/', "-");
            vec![(
                member.to_string(),
                self.file(&name, &format!("binary {source}/{member}\n")),
            )]
        })
    }
    fn built(&self, name: &str) -> Result<PathBuf> {
        Ok(self.file(name, &format!("built {name}\n")))
    }
    fn is_standin(&self, _source: &str, _name: &str) -> bool {
        false
    }
    /// A program that writes completions for bash and zsh, none for fish.
    fn runnable(&self, source: &str, member: &str) -> Result<Vec<PathBuf>, String> {
        let script = self.file(
            &format!("{source}-{member}.completion"),
            &format!("[ \"$2\" != fish ] || exit 1\necho \"# $2 completion of {member}\"\n"),
        );
        Ok(vec![PathBuf::from("/bin/sh"), script])
    }
}

fn options() -> Options {
    Options {
        homepage: "https://example.invalid/kubedist".into(),
        license: "Apache-2.0".into(),
        epoch: EPOCH,
        codecs: Codecs::fast(),
        threads: 1,
        signer: None,
        carry_images: false,
    }
}

/// Every package of `pkg/` staged for both families, amd64.
fn staged(tmp: &Path) -> StagedArch {
    let spec = Spec::load(&crate::util::repo_root()).unwrap();
    let sources_dir = tmp.join("sources");
    fs::create_dir_all(&sources_dir).unwrap();
    let sources = FakePrograms { dir: sources_dir };
    let packages = spec
        .packages
        .iter()
        .map(|p| {
            stage::stage_package(
                &spec,
                p,
                Arch::Amd64,
                &Family::ALL,
                &sources,
                EPOCH,
                &tmp.join("stage"),
            )
            .unwrap()
        })
        .collect();
    let os = SysextOs::parse("flatcar:1.0", &spec.sysext.sysext_level_ids).unwrap();
    let sysext = spec
        .sysext_images("1.34.2")
        .into_iter()
        .map(|(image, version)| {
            stage::stage_sysext(
                &spec,
                image,
                Arch::Amd64,
                &os,
                version,
                EPOCH,
                &tmp.join("stage"),
            )
            .unwrap()
        })
        .collect();
    // A stand-in for busybox: the image writer only copies it.
    let oci_base = stage::stage_oci_base(
        &spec,
        Arch::Amd64,
        "1:1.35.0-4",
        b"#!/bin/sh\n# stand-in shell\n",
        b"copyright\n",
        EPOCH,
        &tmp.join("stage"),
    )
    .unwrap();
    StagedArch {
        arch: Arch::Amd64,
        packages,
        installer: stage::installer(&spec).unwrap(),
        sysext,
        oci_base: Some(oci_base),
        images: None,
    }
}

fn package<'a>(arch: &'a StagedArch, name: &str, family: Family) -> &'a Staged {
    arch.packages
        .iter()
        .flat_map(|p| p.all())
        .find(|s| s.name == name && s.family == family)
        .unwrap()
}

/// `(header, body)` of every member of a tar stream, by name without "./".
fn tar_members(reader: impl Read) -> BTreeMap<String, (tar::Header, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for entry in tar::Archive::new(reader).entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
        let header = entry.header().clone();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).unwrap();
        out.insert(name.trim_start_matches("./").to_string(), (header, body));
    }
    out
}

/// uid and gid 0: written as zeros, or, as cargo-deb's tar headers have
/// them, left empty (dpkg and GNU tar read an empty field as 0).
fn root_owned(h: &tar::Header) -> bool {
    let zero = |field: &[u8]| field.iter().all(|&b| matches!(b, 0 | b'0' | b' '));
    zero(&h.as_old().uid) && zero(&h.as_old().gid)
}

fn ar_members(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut archive = ar::Archive::new(fs::File::open(path).unwrap());
    let mut out = Vec::new();
    while let Some(entry) = archive.next_entry() {
        let mut entry = entry.unwrap();
        let name = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).unwrap();
        out.push((name, body));
    }
    out
}

#[test]
fn the_kubelet_deb_holds_what_dpkg_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let pkg = package(&arch, "kubelet", Family::Deb);
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let deb = super::deb::write(pkg, &options(), tmp.path(), &out)
        .unwrap()
        .path;
    assert_eq!(
        deb.file_name().unwrap().to_str().unwrap(),
        format!("kubelet_{}_amd64.deb", pkg.version)
    );

    let members = ar_members(&deb);
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["debian-binary", "control.tar.xz", "data.tar.xz"]);
    let control = tar_members(xz2::read::XzDecoder::new(members[1].1.as_slice()));
    let data = tar_members(xz2::read::XzDecoder::new(members[2].1.as_slice()));

    let fields = String::from_utf8(control["control"].1.clone()).unwrap();
    for want in [
        "Package: kubelet\n".to_string(),
        format!("Version: {}\n", pkg.version),
        "Architecture: amd64\n".into(),
        "Depends: iptables (>= 1.4.21), kubernetes-cni (>= 1.2.0), util-linux, mount\n".into(),
    ] {
        assert!(fields.contains(&want), "{want:?} not in:\n{fields}");
    }
    // md5sums: right after control, one line per regular file of the data
    // archive, with the digests of the bytes in it.
    let order: Vec<&String> = control.keys().collect();
    assert!(order.contains(&&"md5sums".to_string()), "{order:?}");
    let md5sums = String::from_utf8(control["md5sums"].1.clone()).unwrap();
    let files: Vec<(&String, &Vec<u8>)> = data
        .iter()
        .filter(|(_, (h, _))| h.entry_type().is_file())
        .map(|(n, (_, b))| (n, b))
        .collect();
    assert_eq!(md5sums.lines().count(), files.len(), "{md5sums}");
    for (name, body) in files {
        let line = format!("{}  {name}", hex(&Md5::digest(body)));
        assert!(
            md5sums.lines().any(|l| l == line),
            "{line} not in {md5sums}"
        );
    }
    // Maintainer scripts from pkg/scripts, filled in, executable.
    let postinst = String::from_utf8(control["postinst"].1.clone()).unwrap();
    assert_eq!(control["postinst"].0.mode().unwrap(), 0o755);
    assert!(postinst.contains("UNITS='kubelet.service'"), "{postinst}");
    assert!(crate::stage::leftover_placeholder(&postinst).is_none());
    assert!(control.contains_key("prerm") && control.contains_key("postrm"));

    // The data archive: root-owned, fixed mtime, explicit modes; the env file
    // is a seed, not a conffile (no prompt on upgrade).
    for (name, (h, _)) in &data {
        assert!(root_owned(h), "{name}");
        assert_eq!(h.mtime().unwrap(), EPOCH, "{name}");
    }
    assert_eq!(data["usr/bin/kubelet"].0.mode().unwrap(), 0o755);
    assert_eq!(data["usr/bin/kubelet"].1, b"binary kubernetes/kubelet\n");
    assert_eq!(
        data["usr/lib/systemd/system/kubelet.service"]
            .0
            .mode()
            .unwrap(),
        0o644
    );
    assert!(data.contains_key("usr/share/kubedist/seed/etc/default/kubelet"));
    assert!(!data.contains_key("etc/default/kubelet"));
    assert!(!control.contains_key("conffiles"), "{:?}", control.keys());
}

#[test]
fn kernel_prerequisites_and_crictl_yaml_land_in_both_families() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let kernel = [
        "/usr/lib/modules-load.d/kubernetes.conf",
        "/usr/lib/sysctl.d/60-kubernetes.conf",
    ];

    // deb: the kernel files as they are, crictl.yaml a seed that postinst
    // puts in place (never a conffile).
    let deb = super::deb::write(
        package(&arch, "kubelet", Family::Deb),
        &options(),
        tmp.path(),
        &out,
    )
    .unwrap()
    .path;
    let data = tar_members(xz2::read::XzDecoder::new(ar_members(&deb)[2].1.as_slice()));
    for path in kernel {
        assert_eq!(data[&path[1..]].0.mode().unwrap(), 0o644, "{path}");
    }
    let deb = super::deb::write(
        package(&arch, "cri-tools", Family::Deb),
        &options(),
        tmp.path(),
        &out,
    )
    .unwrap()
    .path;
    let members = ar_members(&deb);
    let control = tar_members(xz2::read::XzDecoder::new(members[1].1.as_slice()));
    let data = tar_members(xz2::read::XzDecoder::new(members[2].1.as_slice()));
    assert!(data.contains_key("usr/share/kubedist/seed/etc/crictl.yaml"));
    assert!(!data.contains_key("etc/crictl.yaml"));
    assert!(!control.contains_key("conffiles"), "{:?}", control.keys());
    let postinst = String::from_utf8(control["postinst"].1.clone()).unwrap();
    assert!(
        postinst.contains("SEEDS='/etc/crictl.yaml:0644'"),
        "{postinst}"
    );

    // rpm: the kernel files plain, crictl.yaml %config(noreplace).
    let rpm_path = super::rpm::write(
        package(&arch, "kubelet", Family::Rpm),
        &options(),
        tmp.path(),
    )
    .unwrap()
    .path;
    let rpm = rpm::Package::open(&rpm_path).unwrap();
    let entries = rpm.metadata.get_file_entries().unwrap();
    for path in kernel {
        let entry = entries
            .iter()
            .find(|e| e.path().to_str() == Some(path))
            .unwrap();
        assert_eq!(entry.permissions(), 0o644, "{path}");
        assert!(!entry.flags().contains(rpm::FileFlags::CONFIG), "{path}");
    }
    let rpm_path = super::rpm::write(
        package(&arch, "cri-tools", Family::Rpm),
        &options(),
        tmp.path(),
    )
    .unwrap()
    .path;
    let rpm = rpm::Package::open(&rpm_path).unwrap();
    let entries = rpm.metadata.get_file_entries().unwrap();
    let crictl = entries
        .iter()
        .find(|e| e.path().to_str() == Some("/etc/crictl.yaml"))
        .unwrap();
    assert!(crictl
        .flags()
        .contains(rpm::FileFlags::CONFIG | rpm::FileFlags::NOREPLACE));
}

#[test]
fn the_kubelet_rpm_keeps_config_and_runs_its_scriptlets() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let pkg = package(&arch, "kubelet", Family::Rpm);
    let rpm_path = super::rpm::write(pkg, &options(), tmp.path()).unwrap().path;
    assert_eq!(
        rpm_path.file_name().unwrap().to_str().unwrap(),
        format!("kubelet-{}.x86_64.rpm", pkg.version)
    );
    let rpm = rpm::Package::open(&rpm_path).unwrap();
    let meta = &rpm.metadata;
    assert_eq!(meta.get_name().unwrap(), "kubelet");
    let entries = meta.get_file_entries().unwrap();
    let by_path: BTreeMap<String, _> = entries
        .iter()
        .map(|e| (e.path().display().to_string(), e))
        .collect();
    let env = by_path["/etc/sysconfig/kubelet"];
    assert!(env
        .flags()
        .contains(rpm::FileFlags::CONFIG | rpm::FileFlags::NOREPLACE));
    let kubelet = by_path["/usr/bin/kubelet"];
    assert_eq!(kubelet.permissions(), 0o755);
    assert_eq!((kubelet.user(), kubelet.group()), ("root", "root"));
    assert_eq!(
        by_path["/usr/lib/systemd/system/kubelet.service"].permissions(),
        0o644
    );
    assert!(by_path["/usr/share/licenses/kubelet/LICENSE"]
        .flags()
        .contains(rpm::FileFlags::LICENSE));
    let post = meta.get_post_install_script().unwrap().script;
    assert!(post.contains("kubelet.service"), "{post}");
    assert!(meta.get_pre_uninstall_script().is_ok());
    let requires: Vec<String> = meta
        .get_requires()
        .unwrap()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    for dep in ["iptables", "kubernetes-cni", "util-linux"] {
        assert!(
            requires.iter().any(|r| r == dep),
            "{dep} not in {requires:?}"
        );
    }
    assert!(
        !requires.iter().any(|r| r == "mount"),
        "deb-only dependency in {requires:?}"
    );
}

/// The kubelet's rpm at each codec: the header names the compressor and
/// the rpmlib feature its payload needs, as rpmbuild does, the payload
/// digest is the written payload's, and every payload decodes to the same
/// archive (xz with the x86 branch filter the kubelet lists for amd64).
#[test]
fn each_rpm_codec_is_named_in_the_header_and_decodes_to_one_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let pkg = package(&arch, "kubelet", Family::Rpm);
    assert!(pkg.xz_filter.is_some(), "pkg/kubelet.toml filters amd64");
    let mut archives = Vec::new();
    for (codec, compressor, feature) in [
        ("rpm=zstd:3", "zstd", Some("rpmlib(PayloadIsZstd)")),
        ("rpm=xz:1+long", "xz", Some("rpmlib(PayloadIsXz)")),
        ("rpm=gz:1", "gzip", None),
    ] {
        let out = tmp.path().join(compressor);
        fs::create_dir_all(&out).unwrap();
        let meta = Options {
            codecs: Codecs::parse(codec, Codecs::fast()).unwrap(),
            ..options()
        };
        let rpm = rpm::Package::open(super::rpm::write(pkg, &meta, &out).unwrap().path).unwrap();
        let header = &rpm.metadata.header;
        assert_eq!(
            header
                .get_entry_data_as_string(rpm::IndexTag::RPMTAG_PAYLOADCOMPRESSOR)
                .unwrap(),
            compressor
        );
        assert_eq!(
            header
                .get_entry_data_as_string_array(rpm::IndexTag::RPMTAG_PAYLOADSHA256)
                .unwrap(),
            [crate::digest::sha256_bytes(&rpm.payload)],
            "{codec}: the header's payload digest"
        );
        let rpmlib: Vec<String> = rpm
            .metadata
            .get_requires()
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .filter(|n| n.starts_with("rpmlib(Payload"))
            .collect();
        let wanted: Vec<&str> = ["rpmlib(PayloadFilesHavePrefix)"]
            .into_iter()
            .chain(feature)
            .collect();
        assert_eq!(rpmlib, wanted, "{codec}: the payload's rpmlib features");
        let mut archive = Vec::new();
        let payload = rpm.payload.as_slice();
        match compressor {
            "zstd" => archive = zstd::stream::decode_all(payload).unwrap(),
            "xz" => {
                xz2::read::XzDecoder::new(payload)
                    .read_to_end(&mut archive)
                    .unwrap();
            }
            _ => {
                flate2::read::GzDecoder::new(payload)
                    .read_to_end(&mut archive)
                    .unwrap();
            }
        }
        assert!(archive.starts_with(b"070701"), "{codec}: a cpio archive");
        archives.push(archive);
    }
    assert!(
        archives.windows(2).all(|w| w[0] == w[1]),
        "one archive for every codec"
    );
}

/// Asserts that what a writer says it put in, which the SBOM lists without
/// a decode, is what its artifact holds, read back as a host unpacks it.
fn assert_held_is_read_back(written: &super::Written) {
    let mut held = written
        .held
        .clone()
        .expect("the writer says what it put in");
    held.sort_by(|a, b| a.path.cmp(&b.path));
    let read = crate::sbom::contents::read(&written.path).unwrap();
    assert!(!read.is_empty(), "{}", written.path.display());
    assert_eq!(held, read, "{}", written.path.display());
}

/// Every package, both families, the rpm at each codec.
#[test]
fn the_files_a_deb_or_rpm_writer_held_are_what_its_artifact_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let (out, out_xz) = (tmp.path().join("out"), tmp.path().join("out-xz"));
    fs::create_dir_all(&out).unwrap();
    fs::create_dir_all(&out_xz).unwrap();
    let xz = Options {
        codecs: Codecs::parse("rpm=xz:1", Codecs::fast()).unwrap(),
        ..options()
    };
    for pkg in arch.packages.iter().flat_map(|p| p.all()) {
        let written = match pkg.family {
            Family::Deb => vec![super::deb::write(pkg, &options(), tmp.path(), &out).unwrap()],
            Family::Rpm => vec![
                super::rpm::write(pkg, &options(), &out).unwrap(),
                super::rpm::write(pkg, &xz, &out_xz).unwrap(),
            ],
        };
        for w in written {
            assert_held_is_read_back(&w);
        }
    }
}

/// The tarball (with an images bundle carried and without), each sysext
/// image and the installer image of two architectures.
#[test]
fn the_files_a_tarball_sysext_or_image_writer_held_are_what_its_artifact_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let bundle: &[u8] = b"not read: the tarball carries it as it is";
    let carried = super::Carried {
        _dir: tempfile::tempdir().unwrap(),
        path: tmp.path().join("bundle.oci.tar"),
        name: "kubedist-images-1.34.2-amd64.oci.tar".into(),
        sha256: crate::digest::sha256_bytes(bundle),
        size: bundle.len() as u64,
    };
    fs::write(&carried.path, bundle).unwrap();
    for (i, carried) in [None, Some(&carried)].into_iter().enumerate() {
        let out = tmp.path().join(format!("tarball-{i}"));
        fs::create_dir(&out).unwrap();
        let written = super::tarball::write(&arch, carried, "1.34.2", &options(), &out);
        assert_held_is_read_back(&written.unwrap());
    }
    for sysext in &arch.sysext {
        assert_held_is_read_back(
            &super::sysext::write(&arch, sysext, &options(), tmp.path()).unwrap(),
        );
    }
    let spec = Spec::load(&crate::util::repo_root()).unwrap();
    let oci = stage::stage_oci(&spec, "1.34.2-1").unwrap();
    // Two architectures' images whose layers are the same blobs: the
    // archive holds each once.
    let again = staged(&tmp.path().join("again"));
    let run = super::Run {
        k8s_version: "1.34.2",
        options: &options(),
        origins: &[],
        work: tmp.path(),
        out_dir: tmp.path(),
    };
    assert_held_is_read_back(&super::oci::write(&[arch, again], &oci, &run).unwrap());
}

#[test]
fn the_tarball_lists_and_checksums_every_file_it_carries() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let path = super::tarball::write(&arch, None, "1.34.2", &options(), tmp.path())
        .unwrap()
        .path;
    assert!(
        path.ends_with("kubedist-1.34.2-linux-amd64.tar.gz"),
        "{path:?}"
    );
    let members = tar_members(flate2::read::GzDecoder::new(fs::File::open(&path).unwrap()));
    let top = "kubedist-1.34.2-linux-amd64";
    for (name, (h, _)) in &members {
        assert!(name.starts_with(top), "{name}");
        assert!(root_owned(h), "{name}");
        assert_eq!(h.mtime().unwrap(), EPOCH, "{name}");
    }
    let installer = &members[&format!("{top}/install.sh")];
    assert_eq!(installer.0.mode().unwrap(), 0o755);
    assert_eq!(installer.1, arch.installer);
    // SHA256SUMS names every regular file but itself, with its digest.
    let sums = String::from_utf8(members[&format!("{top}/SHA256SUMS")].1.clone()).unwrap();
    let files: Vec<&String> = members
        .iter()
        .filter(|(n, (h, _))| h.entry_type().is_file() && !n.ends_with("/SHA256SUMS"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(sums.lines().count(), files.len(), "{sums}");
    for name in files {
        let rel = name.strip_prefix(&format!("{top}/")).unwrap();
        let line = format!("{}  {rel}", hex(&Sha256::digest(&members[name].1)));
        assert!(sums.lines().any(|l| l == line), "{line} not in SHA256SUMS");
    }
    // MANIFEST: both families' env files, the OpenRC and runit files, the
    // kernel prerequisites and crictl.yaml.
    let manifest = String::from_utf8(members[&format!("{top}/MANIFEST")].1.clone()).unwrap();
    for want in [
        "/etc/default/kubelet",
        "/etc/sysconfig/kubelet",
        "/etc/init.d/kubelet",
        "/etc/sv/kubelet/run",
        "/usr/lib/modules-load.d/kubernetes.conf",
        "/usr/lib/sysctl.d/60-kubernetes.conf",
        "/etc/crictl.yaml",
    ] {
        assert!(manifest.contains(want), "{want} not in MANIFEST");
    }
}

#[test]
fn the_same_staged_input_gives_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let pkg = package(&arch, "kubeadm", Family::Deb);
    let mut digests = Vec::new();
    for run in ["a", "b"] {
        let out = tmp.path().join(run);
        fs::create_dir(&out).unwrap();
        let work = tmp.path().join(format!("work-{run}"));
        let deb = super::deb::write(pkg, &options(), &work, &out)
            .unwrap()
            .path;
        let rpm = super::rpm::write(package(&arch, "kubeadm", Family::Rpm), &options(), &out)
            .unwrap()
            .path;
        digests.push((fs::read(deb).unwrap(), fs::read(rpm).unwrap()));
    }
    assert!(digests[0] == digests[1], "two writes of kubeadm differ");
}

/// One path of a squashfs image.
struct Member {
    mode: u16,
    uid: u32,
    gid: u32,
    mtime: u32,
    /// A file's contents; `None` for anything else.
    body: Option<Vec<u8>>,
}

/// Every path of a squashfs image, without the leading `/`.
fn squashfs_members(path: &Path) -> BTreeMap<String, Member> {
    use backhand::{FilesystemReader, InnerNode};
    let file = std::io::BufReader::new(fs::File::open(path).unwrap());
    let reader = FilesystemReader::from_reader(file).unwrap();
    let mut out = BTreeMap::new();
    for node in reader.files() {
        let name = node
            .fullpath
            .to_string_lossy()
            .trim_start_matches('/')
            .to_string();
        let body = match &node.inner {
            InnerNode::File(file) => {
                let mut body = Vec::new();
                reader.file(file).reader().read_to_end(&mut body).unwrap();
                Some(body)
            }
            _ => None,
        };
        let h = node.header;
        let member = Member {
            mode: h.permissions,
            uid: h.uid,
            gid: h.gid,
            mtime: h.mtime,
            body,
        };
        out.insert(name, member);
    }
    out
}

#[test]
fn the_sysext_image_holds_usr_only_and_says_which_hosts_may_merge_it() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let node = &arch.sysext[0];
    assert!(!node.runtime);
    let image = super::sysext::write(&arch, node, &options(), tmp.path())
        .unwrap()
        .path;
    assert!(
        image.ends_with("kubernetes-v1.34.2-x86-64.raw"),
        "{image:?}"
    );
    let members = squashfs_members(&image);
    for (name, m) in &members {
        assert!(
            name.is_empty() || name == "usr" || name.starts_with("usr/"),
            "{name}"
        );
        assert_eq!((m.uid, m.gid), (0, 0), "{name}");
        if !name.is_empty() {
            assert_eq!(u64::from(m.mtime), EPOCH, "{name}");
        }
    }
    let file = |name: &str| {
        let m = &members[name];
        (m.mode, String::from_utf8(m.body.clone().unwrap()).unwrap())
    };
    for bin in ["kubelet", "kubelet-wrapper", "kubeadm", "kubectl", "crictl"] {
        assert_eq!(file(&format!("usr/bin/{bin}")).0, 0o755, "{bin}");
    }
    assert_eq!(file("usr/bin/kubelet").1, "binary kubernetes/kubelet\n");
    // The rpm staging: units under /usr/lib, the drop-in reading the rpm env file.
    assert_eq!(file("usr/lib/systemd/system/kubelet.service").0, 0o644);
    let dropin = file("usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf").1;
    assert!(
        dropin.contains("EnvironmentFile=-/etc/sysconfig/kubelet"),
        "{dropin}"
    );
    // No /opt: the plugins live under /usr, the script copies them.
    assert_eq!(file("usr/lib/kubedist/cni/bin/bridge").1, "plugin bridge\n");
    assert_eq!(file("usr/lib/kubedist/cni-plugins").0, 0o755);
    assert!(members.contains_key("usr/lib/systemd/system/kubedist-cni-plugins.service"));
    let upholds = file("usr/lib/systemd/system/multi-user.target.d/10-kubernetes-sysext.conf").1;
    assert!(upholds.contains("Upholds=kubelet.service"), "{upholds}");
    let release = file("usr/lib/extension-release.d/extension-release.kubernetes").1;
    assert_eq!(
        release,
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\nSYSEXT_VERSION_ID=1.34.2-1\n\
         SYSEXT_SCOPE=system\nEXTENSION_RELOAD_MANAGER=1\n"
    );
    // The runtime is an image of its own.
    assert!(!members.contains_key("usr/bin/containerd"));
    let tmpfiles = file("usr/lib/tmpfiles.d/kubernetes.conf").1;
    for line in [
        "d /var/lib/kubelet 0700 root root -",
        "d /opt/cni/bin 0755 root root -",
    ] {
        assert!(
            tmpfiles.lines().any(|l| l == line),
            "{line} not in:\n{tmpfiles}"
        );
    }

    // The same bytes from a second write; unsquashfs, where installed, reads
    // the same listing.
    let again = tmp.path().join("again");
    fs::create_dir(&again).unwrap();
    let second = super::sysext::write(&arch, node, &options(), &again)
        .unwrap()
        .path;
    assert!(
        fs::read(&image).unwrap() == fs::read(&second).unwrap(),
        "two writes differ"
    );
    if crate::util::on_path("unsquashfs") {
        let out = std::process::Command::new("unsquashfs")
            .args(["-lln", "-d", ""])
            .arg(&image)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = String::from_utf8(out.stdout).unwrap();
        assert!(
            listing.contains("-rwxr-xr-x 0/0") && listing.contains("/usr/bin/kubelet\n"),
            "{listing}"
        );
        assert_eq!(listing.lines().count(), members.len(), "{listing}");
    }
}

#[test]
fn the_runtime_sysext_image_holds_the_runtime_configured_from_usr() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let runtime = &arch.sysext[1];
    assert!(runtime.runtime);
    let image = super::sysext::write(&arch, runtime, &options(), tmp.path())
        .unwrap()
        .path;
    let version = &runtime.upstream_version;
    assert!(
        image.ends_with(format!("kubedist-containerd-v{version}-x86-64.raw")),
        "{image:?}"
    );
    let members = squashfs_members(&image);
    let file = |name: &str| {
        let m = members.get(name).unwrap_or_else(|| panic!("no {name}"));
        (m.mode, String::from_utf8(m.body.clone().unwrap()).unwrap())
    };
    for bin in ["containerd", "containerd-shim-runc-v2", "ctr", "runc"] {
        assert_eq!(file(&format!("usr/bin/{bin}")).0, 0o755, "{bin}");
    }
    assert!(!members.contains_key("usr/bin/kubelet"));
    assert!(members
        .keys()
        .all(|k| k.is_empty() || k == "usr" || k.starts_with("usr/")));
    // The systemd hosts' configuration, read from /usr by a drop-in.
    let config = file("usr/lib/kubedist/containerd/config.toml").1;
    assert!(config.contains("SystemdCgroup = true"), "{config}");
    assert!(config.contains("imports = [\"/etc/containerd/conf.d/*.toml\"]"));
    let dropin = file("usr/lib/systemd/system/containerd.service.d/10-kubedist-sysext.conf").1;
    assert!(
        dropin.contains("\nExecStart=\nExecStart=/usr/bin/containerd --config /usr/lib/kubedist/containerd/config.toml\n"),
        "{dropin}"
    );
    assert!(file("usr/lib/systemd/system/containerd.service")
        .1
        .contains("Delegate=yes"));
    let upholds =
        file("usr/lib/systemd/system/multi-user.target.d/10-kubedist-containerd-sysext.conf").1;
    assert!(upholds.contains("Upholds=containerd.service"), "{upholds}");
    let release = file("usr/lib/extension-release.d/extension-release.kubedist-containerd").1;
    assert!(
        release.contains(&format!("SYSEXT_VERSION_ID={version}-1\n")),
        "{release}"
    );
    let tmpfiles = file("usr/lib/tmpfiles.d/kubedist-containerd.conf").1;
    assert!(
        tmpfiles
            .lines()
            .any(|l| l == "d /etc/containerd/conf.d 0755 root root -"),
        "{tmpfiles}"
    );
    let shipped = file("usr/lib/kubedist/sysext-files/kubedist-containerd.sha256").1;
    assert!(shipped.contains("  usr/bin/runc\n"), "{shipped}");
}

#[test]
fn sysext_hosts_are_checked_when_they_are_read() {
    let level = vec!["flatcar".to_string()];
    let render = |s: &str| SysextOs::parse(s, &level).map(|o| o.release_lines());
    assert_eq!(render("_any").unwrap(), "ID=_any\n");
    assert_eq!(
        render("flatcar:1.0").unwrap(),
        "ID=flatcar\nSYSEXT_LEVEL=1.0\n"
    );
    assert_eq!(render("fedora:40").unwrap(), "ID=fedora\nVERSION_ID=40\n");
    for (bad, says) in [
        ("fedora", "ID:VERSION"),
        ("Fedora:40", "no host can match"),
        ("fedora:", "no host can match"),
        ("fedora:4 0", "no host can match"),
        ("_any:1", "takes no version"),
    ] {
        let err = format!("{:#}", render(bad).unwrap_err());
        assert!(err.contains(says) && !err.contains('\n'), "{bad}: {err}");
    }
}

/// The members of a gzip-compressed layer.
fn layer_members(gz: &[u8]) -> BTreeMap<String, (tar::Header, Vec<u8>)> {
    tar_members(flate2::read::GzDecoder::new(gz))
}

#[test]
fn the_installer_image_is_a_layout_whose_blobs_match_their_names() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let spec = Spec::load(&crate::util::repo_root()).unwrap();
    let oci = stage::stage_oci(&spec, "1.34.2-1").unwrap();
    let arches = [arch];
    let mut archives = Vec::new();
    for run in ["a", "b"] {
        let out = tmp.path().join(format!("oci-{run}"));
        fs::create_dir(&out).unwrap();
        let run = super::Run {
            k8s_version: "1.34.2",
            options: &options(),
            origins: &[],
            work: tmp.path(),
            out_dir: &out,
        };
        let path = super::oci::write(&arches, &oci, &run).unwrap().path;
        archives.push(fs::read(path).unwrap());
    }
    assert!(archives[0] == archives[1], "two writes of the image differ");

    let members = tar_members(archives[0].as_slice());
    for (name, (header, _)) in &members {
        assert!(root_owned(header), "{name} is not root-owned");
        assert_eq!(header.mtime().unwrap(), EPOCH, "{name}");
    }
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&members[name].1).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let blob = |digest: &str| -> &[u8] {
        let hex = digest.strip_prefix("sha256:").unwrap();
        &members[&format!("blobs/sha256/{hex}")].1
    };
    for (name, (_, data)) in &members {
        if let Some(hex) = name.strip_prefix("blobs/sha256/").filter(|h| !h.is_empty()) {
            assert_eq!(hex, crate::digest::sha256_bytes(data), "{name}");
        }
    }
    assert_eq!(json("oci-layout")["imageLayoutVersion"], "1.0.0");
    let index = json("index.json");
    let top = &index["manifests"][0];
    assert_eq!(
        top["annotations"]["org.opencontainers.image.ref.name"],
        "localhost/kubedist/installer:1.34.2-1"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(blob(top["digest"].as_str().unwrap())).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
    let docker = json("manifest.json");
    assert_eq!(
        docker[0]["RepoTags"][0],
        "localhost/kubedist/installer:1.34.2-1"
    );

    // Each layer's diff_id is the digest of its uncompressed tar; every
    // file the tarball carries is in one of them, at /kubedist/bundle.
    let layers = manifest["layers"].as_array().unwrap();
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(layers.len(), diff_ids.len());
    let mut files = BTreeMap::new();
    let mut mtimes = Vec::new();
    for (layer, diff_id) in layers.iter().zip(diff_ids) {
        let gz = blob(layer["digest"].as_str().unwrap());
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(
            diff_id.as_str().unwrap(),
            format!("sha256:{}", crate::digest::sha256_bytes(&tar))
        );
        let members = layer_members(gz);
        mtimes.push(
            members
                .values()
                .map(|(h, _)| h.mtime().unwrap())
                .max()
                .unwrap(),
        );
        files.extend(members);
    }
    // The shared layers first (mtime 0), the release's and the SBOM last.
    let (shared, own) = mtimes.split_at(mtimes.len() - 2);
    assert!(
        shared.iter().all(|&m| m == 0) && own == [EPOCH, EPOCH],
        "{mtimes:?}"
    );
    // The SBOM, alone in the last layer, names every other file.
    let last = layer_members(blob(layers.last().unwrap()["digest"].as_str().unwrap()));
    let files_in_last: Vec<&String> = last.keys().filter(|k| !k.ends_with('/')).collect();
    assert_eq!(files_in_last, ["kubedist/sbom.spdx.json"]);
    let sbom: serde_json::Value =
        serde_json::from_slice(&files["kubedist/sbom.spdx.json"].1).unwrap();
    let named: Vec<&str> = sbom["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fileName"].as_str().unwrap())
        .collect();
    assert!(named.contains(&"./kubedist/bundle/SHA256SUMS"), "{named:?}");
    assert!(!named.contains(&"./kubedist/sbom.spdx.json"), "{named:?}");
    let sums = String::from_utf8(files["kubedist/bundle/SHA256SUMS"].1.clone()).unwrap();
    for line in sums.lines() {
        let (sha, path) = line.split_once("  ").unwrap();
        let (_, data) = &files[&format!("kubedist/bundle/{path}")];
        assert_eq!(sha, crate::digest::sha256_bytes(data), "{path}");
    }
    let env = config["config"]["Env"].as_array().unwrap();
    let want = format!(
        "KUBEDIST_SHA256SUMS={}",
        crate::digest::sha256_bytes(sums.as_bytes())
    );
    assert!(
        env.iter()
            .any(|e| e == &serde_json::Value::from(want.clone())),
        "{env:?}"
    );
    assert_eq!(
        files["bin/sh"].0.link_name().unwrap().unwrap().to_str(),
        Some("busybox")
    );
    assert_eq!(files["tmp/"].0.mode().unwrap(), 0o1777);
    assert_eq!(files["kubedist/entrypoint.sh"].0.mode().unwrap(), 0o755);
    assert!(String::from_utf8_lossy(&files["kubedist/release"].1)
        .starts_with("kubedist-1.34.2-linux-amd64"));
}

#[test]
fn a_signed_tarball_carries_a_reproducible_signature_of_its_sha256sums() {
    use pgp::composed::{Deserializable, DetachedSignature, SignedSecretKey};
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let key = crate::keys::RepoKey::generate_test_key(&tmp.path().join("k.asc")).unwrap();
    let secret = std::fs::read(tmp.path().join("k.asc")).unwrap();
    let public = SignedSecretKey::from_armor_single(&secret[..])
        .unwrap()
        .0
        .to_public_key();
    let signed = Options {
        signer: Some(std::sync::Arc::new(key)),
        ..options()
    };
    let top = "kubedist-1.34.2-linux-amd64";
    let mut written = Vec::new();
    for run in ["a", "b"] {
        let out = tmp.path().join(run);
        fs::create_dir(&out).unwrap();
        let path = super::tarball::write(&arch, None, "1.34.2", &signed, &out)
            .unwrap()
            .path;
        written.push(fs::read(&path).unwrap());
    }
    assert!(written[0] == written[1], "two signed tarballs differ");
    let members = tar_members(flate2::read::GzDecoder::new(&written[0][..]));
    let sums = &members[&format!("{top}/SHA256SUMS")].1;
    let asc = String::from_utf8(members[&format!("{top}/SHA256SUMS.asc")].1.clone()).unwrap();
    let (sig, _) = DetachedSignature::from_string(&asc).unwrap();
    sig.verify(&public, sums).unwrap();
    assert!(sig.verify(&public, b"tampered\n").is_err());
    // The signature is not among the files SHA256SUMS lists.
    assert!(!String::from_utf8_lossy(sums).contains("SHA256SUMS.asc"));
    // Unsigned: no signature file.
    let path = super::tarball::write(&arch, None, "1.34.2", &options(), tmp.path())
        .unwrap()
        .path;
    let members = tar_members(flate2::read::GzDecoder::new(fs::File::open(path).unwrap()));
    assert!(!members.contains_key(&format!("{top}/SHA256SUMS.asc")));
}

#[test]
fn completions_land_in_each_familys_vendor_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let arch = staged(tmp.path());
    let deb = package(&arch, "kubectl", Family::Deb);
    let rpm_pkg = package(&arch, "kubectl", Family::Rpm);
    let dests = |p: &Staged| -> Vec<String> {
        p.files
            .iter()
            .map(|f| f.dest.clone())
            .filter(|d| d.contains("completion") || d.contains("zsh"))
            .collect()
    };
    assert_eq!(
        dests(deb),
        [
            "/usr/share/bash-completion/completions/kubectl",
            "/usr/share/zsh/vendor-completions/_kubectl"
        ]
    );
    assert_eq!(
        dests(rpm_pkg),
        [
            "/usr/share/bash-completion/completions/kubectl",
            "/usr/share/zsh/site-functions/_kubectl"
        ]
    );
    let body = fs::read_to_string(
        &deb.files
            .iter()
            .find(|f| f.dest.ends_with("/_kubectl"))
            .unwrap()
            .path,
    )
    .unwrap();
    assert_eq!(body, "# zsh completion of kubectl\n");
    // The shell without a file is named in the description, with the reason.
    assert!(
        deb.description
            .contains("no shell completions for fish: `kubectl completion fish` failed"),
        "{}",
        deb.description
    );
    assert!(!deb.description.contains("for bash"), "{}", deb.description);
    // The rpm owns the directories (shared with the shells' packages).
    let rpm_path = super::rpm::write(rpm_pkg, &options(), tmp.path())
        .unwrap()
        .path;
    let rpm = rpm::Package::open(&rpm_path).unwrap();
    let entries = rpm.metadata.get_file_entries().unwrap();
    for dir in [
        "/usr/share/bash-completion",
        "/usr/share/bash-completion/completions",
        "/usr/share/zsh",
        "/usr/share/zsh/site-functions",
    ] {
        let entry = entries
            .iter()
            .find(|e| e.path().to_str() == Some(dir))
            .unwrap_or_else(|| panic!("the rpm does not own {dir}"));
        assert_eq!(entry.permissions(), 0o755, "{dir}");
    }
    assert!(!entries
        .iter()
        .any(|e| e.path().to_str() == Some("/usr/share")));
    // The deb carries its zsh file in Debian's directory, mode 0644.
    let out = tmp.path().join("debs");
    fs::create_dir(&out).unwrap();
    let deb_path = super::deb::write(deb, &options(), tmp.path(), &out)
        .unwrap()
        .path;
    let members = ar_members(&deb_path);
    let data = tar_members(xz2::read::XzDecoder::new(members[2].1.as_slice()));
    let (h, body) = &data["usr/share/zsh/vendor-completions/_kubectl"];
    assert_eq!(h.mode().unwrap(), 0o644);
    assert_eq!(body, b"# zsh completion of kubectl\n");
}
