use std::path::Path;

use super::*;

#[test]
fn local_replacements_are_the_required_directory_ones() {
    let go_mod = "module k8s.io/kubernetes\n\nrequire (\n\tk8s.io/api v0.0.0\n\
                  \tgithub.com/x/y v1.0.0 // indirect\n)\n\
                  require k8s.io/kubelet v0.0.0\n\n\
                  replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\
                  \tgithub.com/x/y => github.com/x/y v1.2.3\n)\n\
                  replace k8s.io/kubelet => ./staging/src/k8s.io/kubelet\n\
                  replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY\n";
    assert_eq!(local_replacements(go_mod), ["k8s.io/api", "k8s.io/kubelet"]);
}

#[test]
fn a_checksum_mismatch_is_one_line_naming_go_sum_and_the_module() {
    let stderr = "go: downloading github.com/x/y v1.0.0\n\
                  verifying github.com/x/y@v1.0.0: checksum mismatch\n\
                  \tdownloaded: h1:AAA=\n\tgo.sum:     h1:BBB=\n\n\
                  SECURITY ERROR\nThis download does NOT match an earlier download recorded in go.sum.\n";
    assert_eq!(
        go_failure(stderr, Path::new("pkg/source/cri-tools/v1.34.0/go.sum")),
        "pkg/source/cri-tools/v1.34.0/go.sum: github.com/x/y@v1.0.0: checksum mismatch \
         (the module is h1:AAA=, go.sum says h1:BBB=): refused"
    );
}

#[test]
fn modules_the_proxy_does_not_serve_are_named_in_one_line() {
    // What go 1.27's `go mod tidy` printed for k8s.io/kubernetes
    // v1.38.0-beta.0 on 2026-11-29.
    let stderr = "go: downloading k8s.io/api v0.38.0-beta.0\n\
        go: k8s.io/kubernetes/cmd/kube-apiserver imports\n\
        \tk8s.io/kubernetes/cmd/kube-apiserver/app imports\n\
        \tk8s.io/apiextensions-api/pkg/apis/apiextensions/v1: k8s.io/apiextensions-api@v0.38.0-beta.0: \
        reading https://proxy.golang.org/k8s.io/apiextensions-api/@v/v0.38.0-beta.0.zip: 403 Forbidden\n\
        \tserver response: This module version is not available.\n\
        go: k8s.io/kubernetes/cmd/kubelet imports\n\
        \tsigs.k8s.io/iptables-wrappers/pkg/iptables: sigs.k8s.io/iptables-wrappers@v1.0.0: \
        reading https://proxy.golang.org/sigs.k8s.io/iptables-wrappers/@v/v1.0.0.zip: 403 Forbidden\n";
    assert_eq!(
        go_failure(stderr, Path::new("go.sum")),
        "the Go module proxy does not serve k8s.io/apiextensions-api v0.38.0-beta.0, \
         sigs.k8s.io/iptables-wrappers v1.0.0, so it cannot be built from source here"
    );
}

#[test]
fn a_module_the_checksum_database_does_not_know_is_refused_naming_it() {
    let stderr = "go: example.com/m@v1.0.1: verifying go.mod: example.com/m@v1.0.1/go.mod: \
        reading https://sum.golang.org/lookup/example.com/m@v1.0.1: 404 Not Found\n\
        \tserver response: not found: example.com/m@v1.0.1: invalid version: unknown revision v1.0.1\n";
    assert_eq!(
        go_failure(stderr, Path::new("go.sum")),
        "the checksum database does not know example.com/m v1.0.1: refused"
    );
}

#[test]
fn a_library_the_linker_cannot_find_is_named() {
    let stderr = "# github.com/opencontainers/runc\n\
                  /usr/local/go/pkg/tool/linux_amd64/link: running x86_64-linux-gnu-gcc failed: exit status 1\n\
                  /usr/bin/x86_64-linux-gnu-ld.bfd: cannot find -lseccomp: No such file or directory\n\
                  collect2: error: ld returned 1 exit status\n";
    assert_eq!(
        go_failure(stderr, Path::new("go.sum")),
        "/usr/bin/x86_64-linux-gnu-ld.bfd: cannot find -lseccomp: No such file or directory"
    );
}

/// A recipe whose C libraries the build unpacks (runc's) gives the same
/// bytes wherever they are unpacked: its programs link without a Go build
/// ID, which would carry that path (`Recipe::ldflags`).
#[test]
fn a_recipe_with_unpacked_c_libraries_links_without_a_go_build_id() {
    let recipes = Recipes::load(&crate::util::repo_root()).unwrap();
    let unpacking: Vec<_> = recipes
        .recipes
        .iter()
        .filter(|(_, r)| !r.debian.is_empty())
        .collect();
    assert!(unpacking.iter().any(|(name, _)| name.as_str() == "runc"));
    for (name, recipe) in unpacking {
        for version in recipe.versions.keys() {
            let ldflags = recipe.ldflags(version).unwrap();
            assert!(
                ldflags.iter().any(|f| f == "-buildid="),
                "{name} {version}: {ldflags:?}"
            );
        }
    }
    let kubernetes = recipes.get("kubernetes").unwrap();
    let version = kubernetes.versions.keys().next().unwrap();
    assert!(!kubernetes
        .ldflags(version)
        .unwrap()
        .iter()
        .any(|f| f == "-buildid="));
}

/// A sysroot as `c_sysroot` unpacks one, at `dir`, for the host: one
/// static C library (`kdsys`), its header and its pkg-config file.
fn c_library_sysroot(dir: &Path, triple: &str) {
    let lib = dir.join("usr/lib").join(triple);
    std::fs::create_dir_all(lib.join("pkgconfig")).unwrap();
    std::fs::create_dir_all(dir.join("usr/include")).unwrap();
    std::fs::write(dir.join("usr/include/kdsys.h"), "int kdsys_answer(void);\n").unwrap();
    let source = dir.join("kdsys.c");
    std::fs::write(&source, "int kdsys_answer(void) { return 42; }\n").unwrap();
    let gcc = Command::new(format!("{triple}-gcc"))
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(dir.join("kdsys.o"))
        .status()
        .unwrap();
    assert!(gcc.success());
    let ar = Command::new("ar")
        .arg("rcs")
        .arg(lib.join("libkdsys.a"))
        .arg(dir.join("kdsys.o"))
        .status()
        .unwrap();
    assert!(ar.success());
    std::fs::write(
        lib.join("pkgconfig/kdsys.pc"),
        format!(
            "libdir=/usr/lib/{triple}\nincludedir=/usr/include\n\
             Name: kdsys\nDescription: a test library\nVersion: 1\n\
             Libs: -L${{libdir}} -lkdsys\nCflags: -I${{includedir}}\n"
        ),
    )
    .unwrap();
}

/// A cgo program built against C libraries unpacked at one place, that
/// place removed, then built against the same libraries unpacked at
/// another (as t-source's second build does, in its own program cache):
/// the second build links. Go's shared compile cache must not hand it the
/// package compiled with the first place's `-L` (`Recipe::go_build`).
#[test]
fn a_cgo_build_links_with_its_own_sysroot_after_another_was_removed() {
    let arch = Arch::host().unwrap();
    let triple = arch.gnu_triple();
    let module = tempfile::tempdir().unwrap();
    // A module of its own per run: nothing of an earlier run's cache helps.
    let name = format!(
        "example.com/kdsys{}",
        module
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_lowercase()
            .replace(['.', '_'], "")
    );
    std::fs::write(
        module.path().join("go.mod"),
        format!("module {name}\n\ngo 1.22\n"),
    )
    .unwrap();
    std::fs::write(module.path().join("go.sum"), "").unwrap();
    std::fs::write(
        module.path().join("main.go"),
        "package main\n\n// #cgo pkg-config: kdsys\n// #include <kdsys.h>\nimport \"C\"\n\n\
         func main() { println(int(C.kdsys_answer())) }\n",
    )
    .unwrap();
    let recipe: Recipe = toml::from_str(&format!(
        "module = {name:?}\npackages = [\".\"]\ntags = []\nldflags = [\"-s\", \"-w\"]\n\
         cgo = true\ndebian = [\"kdsys-dev\"]\n\
         [versions.\"1.0.0\"]\ndate = \"2026-01-01T00:00:00Z\"\ncommit = \"0\"\n"
    ))
    .unwrap();
    let go = Go::from_env(&crate::util::repo_root()).unwrap();
    let build = |sysroot: &Path| {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = recipe
            .go_build(
                &go,
                module.path(),
                "1.0.0",
                arch,
                &[".".to_string()],
                Some(sysroot),
                out.path(),
            )
            .unwrap();
        let program = out.path().join(program_name(&name));
        run_go(&mut cmd, "the test program", &module.path().join("go.sum")).unwrap();
        let ran = Command::new(&program).output().unwrap();
        String::from_utf8_lossy(&ran.stderr).trim().to_string()
    };
    let first = tempfile::tempdir().unwrap();
    c_library_sysroot(first.path(), triple);
    assert_eq!(build(first.path()), "42");
    drop(first);
    let second = tempfile::tempdir().unwrap();
    c_library_sysroot(second.path(), triple);
    assert_eq!(build(second.path()), "42");
}

#[test]
fn every_release_source_has_a_recipe_and_every_recipe_version_its_pins() {
    let root = crate::util::repo_root();
    let spec = Spec::load(&root).unwrap();
    let recipes = Recipes::load(&root).unwrap();
    for (name, source) in &spec.release.sources {
        let recipe = recipes.get(name).unwrap();
        assert!(
            recipe.versions.contains_key(&source.version),
            "pkg/source.toml: [{name}] has no facts of the pinned {}",
            source.version
        );
    }
    for (name, recipe) in &recipes.recipes {
        for version in recipe.versions.keys() {
            let pins = pins_dir(&root, name, version);
            if pins.exists() {
                verify_pins(&pins, name, recipe, version).unwrap();
            }
        }
        // The versions the release pins are always buildable.
        if let Some(source) = spec.release.sources.get(name) {
            verify_pins(
                &pins_dir(&root, name, &source.version),
                name,
                recipe,
                &source.version,
            )
            .unwrap();
        }
    }
}

/// A Go toolchain of the machine with its own program cache and, where
/// given, its own module cache.
fn go_with(cache: &Path, modcache: Option<&Path>) -> Go {
    let mut go = Go::from_env(&crate::util::repo_root()).unwrap();
    go.cache = cache.to_path_buf();
    if let Some(dir) = modcache {
        go.env.push(("GOMODCACHE".into(), dir.to_path_buf()));
    }
    go
}

/// A copy of the release's pinned modules of `name`, to edit.
fn pins_copy(name: &str) -> (tempfile::TempDir, Recipes, String) {
    let root = crate::util::repo_root();
    let spec = Spec::load(&root).unwrap();
    let version = spec.release.sources[name].version.clone();
    let dir = tempfile::tempdir().unwrap();
    for file in ["go.mod", "go.sum"] {
        std::fs::copy(
            pins_dir(&root, name, &version).join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    (dir, Recipes::load(&root).unwrap(), version)
}

/// The CNI plugins of `version` for amd64, from the pins in `pins`.
fn build_cni(
    go: &Go,
    pins: &Path,
    recipes: &Recipes,
    version: &str,
) -> Result<BTreeMap<String, std::path::PathBuf>> {
    let recipe = recipes.get("cni-plugins").unwrap();
    let root = crate::util::repo_root();
    let one = Build {
        root: &root,
        pins: pins.to_path_buf(),
        name: "cni-plugins",
        recipe,
        version,
        packages: &recipe.packages,
    };
    build(go, &one, Arch::Amd64, &mut false)
}

/// Needs Go and the Go module proxy (or a module cache that holds the
/// CNI plugins' modules).
#[test]
fn an_edited_go_sum_line_is_refused_in_one_line_naming_it() {
    let (pins, recipes, version) = pins_copy("cni-plugins");
    let go_sum = pins.path().join("go.sum");
    let text = std::fs::read_to_string(&go_sum).unwrap();
    // The hash of a module's content (not its go.mod), changed.
    let line = text
        .lines()
        .find(|l| l.starts_with("github.com/containernetworking/cni ") && !l.contains("/go.mod"))
        .unwrap();
    let (head, _) = line.rsplit_once(" h1:").unwrap();
    let edited = format!("{head} h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    std::fs::write(&go_sum, text.replace(line, &edited)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let err = build_cni(
        &go_with(cache.path(), None),
        pins.path(),
        &recipes,
        &version,
    )
    .unwrap_err();
    let text = format!("{err:#}");
    eprintln!("{text}");
    assert!(!text.contains('\n'), "{text}");
    assert!(text.contains(&go_sum.display().to_string()), "{text}");
    assert!(
        text.contains("github.com/containernetworking/cni@"),
        "{text}"
    );
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(
        std::fs::read_dir(cache.path()).unwrap().next().is_none(),
        "nothing cached"
    );
}

/// Needs Go and the Go module proxy: the CNI plugins' modules are
/// downloaded into a module cache of the test's own, one file of one of
/// them changed, and the build refused.
#[test]
fn a_module_changed_in_the_module_cache_is_refused_in_one_line_naming_it() {
    let (pins, recipes, version) = pins_copy("cni-plugins");
    let modcache = tempfile::tempdir().unwrap();
    let go = go_with(modcache.path(), Some(&modcache.path().join("mod")));
    let mut download = go.command(pins.path()).unwrap();
    download.args(["mod", "download", "github.com/containernetworking/cni"]);
    run_go(
        &mut download,
        "go mod download",
        &pins.path().join("go.sum"),
    )
    .unwrap();
    let module = std::fs::read_dir(modcache.path().join("mod/github.com/containernetworking"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("cni@"))
        .unwrap()
        .path();
    let file = module.join("LICENSE");
    crate::util::set_mode(&module, 0o755).unwrap();
    crate::util::set_mode(&file, 0o644).unwrap();
    std::fs::write(&file, "changed\n").unwrap();
    let result = build_cni(&go, pins.path(), &recipes, &version);
    // The module cache is read-only as Go leaves it; make it removable.
    let _ = Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(modcache.path())
        .status();
    let text = format!("{:#}", result.unwrap_err());
    eprintln!("{text}");
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.contains("github.com/containernetworking/cni"),
        "{text}"
    );
    assert!(text.contains("modified"), "{text}");
}

#[test]
fn a_module_that_needs_a_newer_go_gets_the_toolchain_named_for_that_go() {
    let go = Go {
        version: "go1.26.8".into(),
        toolchains: [("1.27".to_string(), "go1.27.3".to_string())].into(),
        cache: PathBuf::new(),
        env: Vec::new(),
    };
    assert_eq!(go.toolchain_for("1.24").unwrap(), "go1.26.8");
    assert_eq!(go.toolchain_for("1.26.8").unwrap(), "go1.26.8");
    assert_eq!(go.toolchain_for("1.27.0").unwrap(), "go1.27.3");
    let too_new = go.toolchain_for("1.27.5").unwrap_err().to_string();
    assert!(
        too_new.contains("newer than pkg/source.toml's [toolchains] \"1.27\" = \"go1.27.3\""),
        "{too_new}"
    );
    let unnamed = go.toolchain_for("1.28.0").unwrap_err().to_string();
    assert!(
        unnamed.contains("names no toolchain for Go 1.28"),
        "{unnamed}"
    );
    // The go line of a go.mod decides.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("go.mod"), "module m\n\ngo 1.27.0\n").unwrap();
    assert_eq!(go.toolchain(dir.path()).unwrap(), "go1.27.3");
}

/// A run without an architecture finds the programs of that architecture
/// that the cache holds, by the key `build` writes them under, and leaves
/// out a source whose programs are not all there.
#[test]
fn cached_programs_are_found_by_the_key_build_writes() {
    let root = crate::util::repo_root();
    let spec = Spec::load(&root).unwrap();
    let recipes = Recipes::load(&root).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let go = go_with(cache.path(), None);
    let entry = |name: &str| {
        let recipe = recipes.get(name).unwrap();
        let version = &spec.release.sources[name].version;
        let one = Build::pinned(&root, name, recipe, version, &recipe.packages).unwrap();
        let sysroot = c_sysroot(&go, &one, Arch::Amd64).unwrap();
        let dir = cache_entry(&go, &one, Arch::Amd64, sysroot.as_deref()).unwrap();
        (dir, one.programs(Path::new("")))
    };
    assert!(cached_programs(&spec, &go, Arch::Amd64).unwrap().is_empty());
    let (dir, programs) = entry("cri-tools");
    std::fs::create_dir_all(&dir).unwrap();
    for program in programs.keys() {
        std::fs::write(dir.join(program), "a build\n").unwrap();
    }
    // kubernetes: one of its programs only.
    let (k8s, _) = entry("kubernetes");
    std::fs::create_dir_all(&k8s).unwrap();
    std::fs::write(k8s.join("kubectl"), "a build\n").unwrap();
    let found = cached_programs(&spec, &go, Arch::Amd64).unwrap();
    let crictl = ("cri-tools".to_string(), "crictl".to_string());
    assert_eq!(found.get(&crictl), Some(&dir.join("crictl")));
    assert!(
        found.keys().all(|(source, _)| source == "cri-tools"),
        "{found:?}"
    );
    assert!(cached_programs(&spec, &go, Arch::Arm64).unwrap().is_empty());
}
