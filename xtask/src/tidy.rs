//! Tests of the repository itself: what ARCHITECTURE.md and the docs say is
//! checked against the tree, so the map stays true as the code moves.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    crate::util::repo_root()
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Files git knows (tracked or new and not ignored), relative to the root.
fn repo_files() -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .expect("running git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|f| root().join(f).is_file())
        .map(str::to_string)
        .collect()
}

/// The docs a reader follows: every Markdown file of the repository.
fn docs() -> Vec<String> {
    repo_files()
        .into_iter()
        .filter(|f| f.ends_with(".md"))
        .collect()
}

/// Paths a doc names: Markdown link targets and `code` spans that start
/// with one of the repository's top-level directories.
fn named_paths(text: &str) -> Vec<String> {
    const TOP: &[&str] = &[
        "xtask/",
        "wrapper/",
        "standin/",
        "ci/",
        "pkg/",
        "units/",
        "env-defaults/",
        "installer/",
        "docs/",
        ".ci/",
    ];
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        if TOP.iter().any(|t| span.starts_with(t)) {
            out.push(span.to_string());
        }
    }
    for link in text.split("](").skip(1) {
        if let Some(end) = link.find(')') {
            let target = &link[..end];
            if !target.contains("://") && !target.starts_with('#') {
                out.push(target.split('#').next().unwrap_or("").to_string());
            }
        }
    }
    out.into_iter()
        // Patterns and placeholders name no one file.
        .filter(|p| !p.is_empty() && !p.contains(['*', '<', '{', ' ', '…', '$']))
        .collect()
}

/// Files the docs describe that a run writes.
const WRITTEN_LATER: &[&str] = &[];

#[test]
fn every_path_a_doc_names_exists() {
    let mut missing = Vec::new();
    for doc in docs() {
        let dir = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for path in named_paths(&read(&doc)) {
            let trimmed = path.trim_end_matches('/');
            let here = root().join(dir).join(trimmed);
            let from_root = root().join(trimmed);
            if !here.exists() && !from_root.exists() && !WRITTEN_LATER.contains(&trimmed) {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs name paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_supported_version_is_in_the_lock_or_says_why_not_and_builds_from_source() {
    // The supported versions: the pin and each whose images are known.
    let spec = crate::spec::Spec::load(&root()).unwrap();
    let mut missing = Vec::new();
    for version in spec.image_versions().unwrap() {
        let spec = spec.with_kubernetes_version(&version).unwrap();
        assert_eq!(spec.images.kubernetes, version);
        missing.extend(crate::fetch::unaccounted(&spec).unwrap());
        let pins = format!("pkg/source/kubernetes/v{version}/go.sum");
        if !root().join(&pins).is_file() {
            missing.push(format!(
                "{pins} (cargo xtask source --lock --version {version})"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "pkg/upstream.lock neither pins these nor says why it cannot (take the digest \
         from a published record, or add an [unrecorded] remark), or their source is not \
         pinned:\n{}",
        missing.join("\n")
    );
}

#[test]
fn nothing_refers_to_files_outside_the_repository() {
    // Names of the design notes and test notes that live beside the
    // repository, never in it, also by section ("<NAME> §2"). Spelled in
    // pieces so that this file does not name them itself.
    let design = ["DES", "IGN"].concat();
    let testing = ["TEST", "ING.md"].concat();
    let outside = [
        format!("{design}.md"),
        format!("{design} §"),
        testing,
        ["../", "shared"].concat(),
        ["shared/", "seeds"].concat(),
    ];
    let mut found = Vec::new();
    for file in repo_files() {
        let Ok(text) = fs::read_to_string(root().join(&file)) else {
            continue;
        };
        for name in &outside {
            if text.contains(name.as_str()) {
                found.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references outside the repository:\n{}",
        found.join("\n")
    );
}

/// `name.rs` and `name/` entries of a Markdown table whose first column is
/// a `code` span, from the section headed `heading`.
fn table_modules(text: &str, heading: &str) -> BTreeSet<String> {
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section {heading}"));
    let mut out = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split('|').nth(1).unwrap_or("");
        for name in cell.split('`').skip(1).step_by(2) {
            out.insert(name.to_string());
        }
    }
    out
}

fn source_modules(dir: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            out.insert(format!("{name}/"));
        } else if name.ends_with(".rs") {
            out.insert(name);
        }
    }
    out
}

#[test]
fn architecture_lists_every_module_and_no_other() {
    let text = read("ARCHITECTURE.md");
    for (heading, dir) in [
        ("xtask modules", "xtask/src"),
        ("wrapper modules", "wrapper/src"),
    ] {
        let listed = table_modules(&text, heading);
        let actual = source_modules(dir);
        assert_eq!(listed, actual, "ARCHITECTURE.md's {heading} table vs {dir}");
    }
}

/// The crate-level modules each module of xtask/src uses (`crate::name`).
/// The import graph of xtask/src, one node per file: `repo/state` for
/// repo/state.rs, `repo` for repo/mod.rs. An edge is a path through
/// `crate::` or `super::` (groups `{a, b}` included) to another file's
/// module, taken as deep as such a file exists. Edges between a module and
/// its own ancestors are left out: a child uses its parent's items and the
/// parent its children, as Rust's modules are made; every other cycle,
/// between siblings or across the tree, is one.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("xtask/src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let module_of = |file: &Path| -> String {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let rel = rel.trim_end_matches(".rs");
        rel.strip_suffix("/mod").unwrap_or(rel).to_string()
    };
    let nodes: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    // The deepest module a path (`a::b::item`, from `base`) names.
    let resolve = |base: &str, path: &str| -> Option<String> {
        let mut found = None;
        let mut at = base.to_string();
        for part in path.split("::").map(str::trim) {
            let next = if at.is_empty() {
                part.to_string()
            } else {
                format!("{at}/{part}")
            };
            if !nodes.contains(&next) {
                break;
            }
            found = Some(next.clone());
            at = next;
        }
        found
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        if module == "main" || module == "tidy" || module.ends_with("tests") {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        // Tests may reach anywhere; the code's layering is what counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let parent = module.rsplit_once('/').map_or("", |(p, _)| p).to_string();
        let mut uses = BTreeSet::new();
        for (prefix, base) in [("crate::", String::new()), ("super::", parent)] {
            for part in code.split(prefix).skip(1) {
                let paths: Vec<String> = if let Some(group) = part.strip_prefix('{') {
                    let group = group.split('}').next().unwrap_or("");
                    group.split(',').map(|p| p.trim().to_string()).collect()
                } else {
                    vec![part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                        .collect()]
                };
                for path in paths {
                    let Some(target) = resolve(&base, &path) else {
                        continue;
                    };
                    let nested = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
                    if !nested(&module, &target) && !nested(&target, &module) {
                        uses.insert(target);
                    }
                }
            }
        }
        graph.entry(module).or_default().extend(uses);
    }
    graph
}

#[test]
fn xtask_modules_import_each_other_without_cycles() {
    let graph = module_graph();
    // Depth-first search; a grey node met again closes a cycle.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => {
                let start = path.iter().position(|n| *n == node).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            Some(false) => return None,
            None => {}
        }
        state.insert(node, true);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(node, false);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut state, &mut Vec::new()) {
            panic!("import cycle in xtask/src: {}", cycle.join(" -> "));
        }
    }
    // The bottom stays the bottom: each of these imports only the ones
    // before it.
    let bottom = ["util", "version", "spec"];
    for (i, base) in bottom.iter().enumerate() {
        assert!(
            graph
                .get(*base)
                .is_none_or(|uses| uses.iter().all(|u| bottom[..i].contains(&u.as_str()))),
            "{base} imports {:?}",
            graph[*base]
        );
    }
}

#[test]
fn emitters_read_nothing_but_their_input() {
    // The repository is stage's to read: an emitter that opened pkg/ or
    // the checkout would make artifacts depend on what the cache key and the
    // staged description do not hold.
    // Every file of emit/ but the registry itself and the tests.
    for file in emit_files() {
        if file == "mod.rs" || file == "tests.rs" {
            continue;
        }
        let text = read(&format!("xtask/src/emit/{file}"));
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for forbidden in [
            "repo_root",
            "Spec",
            "join(\"pkg",
            "installer/",
            "join(\"LICENSE",
        ] {
            assert!(
                !code.contains(forbidden),
                "emit/{file} mentions {forbidden}"
            );
        }
    }
}

#[test]
fn dist_reads_its_inputs_through_inputs_alone() {
    // A new kind of input (the runtime, a pre-release) is a variant of
    // inputs.rs and an entry in pkg/: dist names none of the modules that
    // fetch, build or write inputs, and the --from directory's names are
    // written once, in inputs/from_dir.rs.
    let graph = module_graph();
    let dist: Vec<_> = graph
        .iter()
        .filter(|(m, _)| *m == "dist" || m.starts_with("dist/"))
        .collect();
    assert!(dist.len() > 1, "no dist module found");
    for (module, uses) in dist {
        for used in uses {
            let top = used.split('/').next().unwrap_or(used);
            assert!(
                !["fetch", "source", "fixtures", "build"].contains(&top),
                "{module} uses {used}: dist reads its inputs through inputs.rs"
            );
        }
    }
    for file in repo_files() {
        let in_code = file.starts_with("xtask/src/") && file.ends_with(".rs");
        if !in_code || file.ends_with("tests.rs") || file.ends_with("from_dir.rs") {
            continue;
        }
        let text = read(&file);
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for name in [
            "\"STANDINS\"",
            "\"BUILT-FROM-SOURCE\"",
            "\"README\"",
            "join(\"runtime\")",
        ] {
            assert!(
                !code.contains(name),
                "{file} writes the --from directory's name {name}: use inputs::from_dir"
            );
        }
    }
}

/// Every guard ARCHITECTURE.md names (`tidy::NAME`) is a test here.
#[test]
fn every_guard_the_architecture_names_exists() {
    let doc = read("ARCHITECTURE.md");
    let tidy = read("xtask/src/tidy.rs");
    let names: Vec<&str> = doc
        .split("`tidy::")
        .skip(1)
        .filter_map(|rest| rest.split('`').next())
        .collect();
    assert!(names.len() >= 5, "{names:?}");
    for name in names {
        assert!(
            tidy.contains(&format!("#[test]\nfn {name}()")),
            "ARCHITECTURE.md names tidy::{name}, which is no test"
        );
    }
}

/// `(subcommand, flag)` of every `cargo xtask SUB ... --flag` a doc shows:
/// in one code span, or on one line of a code block (`\`-continued lines
/// joined), up to a shell separator.
fn xtask_flags_named(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let joined = text.replace("\\\n", " ");
    for line in joined.lines() {
        for rest in line.split("cargo xtask ").skip(1) {
            // The command ends where its code span or shell command does.
            let command = rest
                .split(['`', '|', ';', '#', ')'])
                .next()
                .unwrap_or("")
                .split("&&")
                .next()
                .unwrap_or("");
            let mut words = command.split_whitespace();
            let Some(sub) = words.next() else { continue };
            if !sub.chars().all(|c| c.is_ascii_lowercase()) {
                continue;
            }
            for word in words {
                let Some(flag) = word.strip_prefix("--") else {
                    continue;
                };
                let flag = flag.split(['=', ',', '.', ':']).next().unwrap_or("");
                if !flag.is_empty() && flag.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                    found.push((sub.to_string(), flag.to_string()));
                }
            }
        }
    }
    found
}

#[test]
fn every_xtask_flag_a_doc_names_exists() {
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let mut checked = 0;
    for doc in docs() {
        for (sub, flag) in xtask_flags_named(&read(&doc)) {
            let Some(command) = cli.find_subcommand(&sub) else {
                panic!("{doc} shows `cargo xtask {sub}`, which is no subcommand");
            };
            let known = flag == "help"
                || command
                    .get_arguments()
                    .any(|a| a.get_long() == Some(flag.as_str()));
            assert!(
                known,
                "{doc} shows `cargo xtask {sub} --{flag}`, which `cargo xtask {sub} --help` does not list"
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} flags found in the docs");
}

/// Every `cargo xtask` command a guide's shell block shows, whole: the
/// subcommand, each flag and each value clap checks (choices, numbers)
/// parse as `cargo xtask` would parse them, the required ones included.
/// Commands holding a placeholder (`<…>`, `…`, `$VAR`) are left out.
#[test]
fn every_xtask_command_a_guide_shows_parses() {
    use clap::CommandFactory;
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in docs() {
        for command in xtask_commands_shown(&read(&doc)) {
            let argv = std::iter::once("cargo xtask".to_string()).chain(command.iter().cloned());
            match crate::cli::Cli::command().try_get_matches_from(argv) {
                Ok(_) => checked += 1,
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => checked += 1,
                Err(e) => failures.push(format!(
                    "{doc}: cargo xtask {}: {}",
                    command.join(" "),
                    e.to_string().lines().next().unwrap_or("")
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 10, "only {checked} commands found in the guides");
}

/// A fenced shell block of a Markdown text (```sh, ```bash, ```shell).
struct ShellBlock<'a> {
    /// The line of its opening fence, from 1.
    line: usize,
    /// The line above the opening fence ("" at the top).
    above: &'a str,
    /// The lines between the fences.
    body: Vec<&'a str>,
}

/// Every shell block of `text`, fences paired in order (a block of another
/// language is skipped whole).
fn shell_blocks(text: &str) -> Vec<ShellBlock<'_>> {
    let lines: Vec<&str> = text.lines().collect();
    let fence = |i: usize| lines[i].trim_start().strip_prefix("```");
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(language) = fence(i) else {
            i += 1;
            continue;
        };
        let end = (i + 1..lines.len())
            .find(|&j| fence(j).is_some())
            .unwrap_or(lines.len());
        if matches!(language, "sh" | "bash" | "shell") {
            blocks.push(ShellBlock {
                line: i + 1,
                above: if i > 0 { lines[i - 1] } else { "" },
                body: lines[i + 1..end].to_vec(),
            });
        }
        i = end + 1;
    }
    blocks
}

/// A guide's `<!-- run by SUITE: NAME -->` markers: (suite, name, the line
/// that follows the marker).
fn run_markers(text: &str) -> Vec<(String, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let marker = line.strip_prefix("<!-- run by ")?.strip_suffix(" -->")?;
            let (suite, name) = marker.split_once(": ")?;
            let next = lines.get(i + 1).copied().unwrap_or("");
            Some((suite.to_string(), name.to_string(), next.to_string()))
        })
        .collect()
}

/// Every shell block a guide marks as run by a suite opens right under its
/// marker, and the suite runs it: it calls `guide` or `kd_guide_block`
/// (ci/lib.sh) with the block's name as the second word after it. A
/// marker no suite reads would claim a test that does not exist.
#[test]
fn every_block_a_guide_says_a_suite_runs_is_run_by_it() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in docs() {
        for (suite, name, next) in run_markers(&read(&doc)) {
            if next != "```sh" {
                failures.push(format!(
                    "{doc}: the marker of {name} is not followed by a sh block"
                ));
                continue;
            }
            let Ok(script) = fs::read_to_string(root().join(&suite)) else {
                failures.push(format!(
                    "{doc}: {name} is run by {suite}, which does not exist"
                ));
                continue;
            };
            let runs_it = script.lines().any(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words.windows(3).any(|w| {
                    matches!(
                        w[0].trim_start_matches(['"', '(', '$']),
                        "guide" | "kd_guide_block"
                    ) && w[2].trim_matches('"') == name
                })
            });
            if runs_it {
                checked += 1;
            } else {
                failures.push(format!("{doc}: {suite} does not run the block {name}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 10,
        "only {checked} blocks are marked as run by a suite"
    );
}

/// Every shell block of a guide is run by a suite, or says in a
/// `<!-- not run…: REASON -->` line above it why not and what runs instead,
/// or holds nothing but `cargo xtask` commands (which
/// `every_xtask_command_a_guide_shows_parses` parses) and comments.
#[test]
fn every_shell_block_of_a_guide_is_run_or_says_why_not() {
    let mut unaccounted = Vec::new();
    let mut blocks = 0;
    for doc in docs()
        .into_iter()
        .filter(|d| d == "README.md" || d.starts_with("docs/"))
    {
        for block in shell_blocks(&read(&doc)) {
            blocks += 1;
            let marked =
                block.above.starts_with("<!-- run by ") || block.above.starts_with("<!-- not run");
            let mut continued = false;
            let xtask_only = block.body.iter().all(|line| {
                let line = line.trim();
                let ok = continued
                    || line.is_empty()
                    || line.starts_with('#')
                    || line.starts_with("cargo xtask ");
                continued = line.ends_with('\\');
                ok
            });
            if !marked && !xtask_only {
                unaccounted.push(format!("{doc}:{}", block.line));
            }
        }
    }
    assert!(
        unaccounted.is_empty(),
        "shell blocks no suite runs and no line says why: {}",
        unaccounted.join(", ")
    );
    assert!(blocks >= 20, "only {blocks} shell blocks in the guides");
}

#[test]
fn run_markers_are_read_with_the_line_after_them() {
    let text = "<!-- run by ci/t-x.sh: a-b -->\n```sh\ntrue\n```\nprose <!-- run by y: z -->\n";
    assert_eq!(
        run_markers(text),
        vec![("ci/t-x.sh".into(), "a-b".into(), "```sh".into())]
    );
}

/// The words of every `cargo xtask` command in the fenced shell blocks of
/// `text` (`\`-continued lines joined), up to a shell separator,
/// redirection or comment; none that holds a placeholder.
fn xtask_commands_shown(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for block in shell_blocks(text) {
        let joined = block.body.join("\n").replace("\\\n", " ");
        for line in joined.lines() {
            for rest in line.split("cargo xtask ").skip(1) {
                let command = rest
                    .split(['|', ';', '#', ')', '>', '&'])
                    .next()
                    .unwrap_or("");
                let words: Vec<String> = command
                    .split_whitespace()
                    .map(|w| w.trim_matches(['"', '\'']).to_string())
                    .collect();
                let placeholder = |w: &String| w.contains(['<', '…', '$']) || w == "...";
                if !words.is_empty() && !words.iter().any(placeholder) {
                    found.push(words);
                }
            }
        }
    }
    found
}

#[test]
fn xtask_commands_are_read_from_shell_blocks_whole() {
    let text = "```sh\ncargo xtask dist --arch amd64 \\\n  --out x >log 2>&1 # c\n\
                cargo xtask repo --out \"$DIR\"\n```\n`cargo xtask test` in prose\n";
    assert_eq!(
        xtask_commands_shown(text),
        vec![vec!["dist", "--arch", "amd64", "--out", "x"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()]
    );
}

#[test]
fn xtask_flags_are_read_from_code_spans_and_blocks() {
    let text = "Run `cargo xtask dist --arch amd64 --formats deb` or\n\
                cargo xtask repo --from a \\\n  --out b | tee x --not-this\n\
                `cargo xtask bench --payload=source,fixtures` and `--other`.";
    assert_eq!(
        xtask_flags_named(text),
        [
            ("dist", "arch"),
            ("dist", "formats"),
            ("repo", "from"),
            ("repo", "out"),
            ("bench", "payload")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

/// The file names of `xtask/src/emit/`, sorted.
fn emit_files() -> Vec<String> {
    let dir = crate::util::repo_root().join("xtask/src/emit");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    files.sort();
    files
}

/// `emit::FORMATS` is the one list of formats: every `impl Format` of
/// emit/ is in it once, nothing outside emit/ names a format's module to
/// write with it, and the README's list of all formats is the registry's.
#[test]
fn formats_come_from_the_one_registry() {
    use crate::emit::FORMATS;
    let implemented: usize = emit_files()
        .iter()
        .map(|f| {
            read(&format!("xtask/src/emit/{f}"))
                .matches("impl Format for ")
                .count()
        })
        .sum();
    assert_eq!(
        implemented,
        FORMATS.len(),
        "impl Format in emit/ against FORMATS"
    );
    let mut names: Vec<&str> = FORMATS.iter().map(|f| f.about().name).collect();
    let all = names.join(",");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), FORMATS.len(), "two formats of one name");
    // dist turns the registry into jobs: it calls no writer by hand, and
    // neither it nor the command line names a format.
    for file in ["dist.rs", "cli.rs", "stage.rs", "cache.rs"] {
        let text = read(&format!("xtask/src/{file}"));
        for module in ["deb", "rpm", "tarball", "sysext", "oci", "images"] {
            assert!(
                !text.contains(&format!("emit::{module}::")),
                "{file} calls emit::{module} by hand"
            );
        }
    }
    for file in ["dist.rs", "cli.rs"] {
        let text = read(&format!("xtask/src/{file}"));
        for format in FORMATS {
            let literal = format!("\"{}\"", format.about().name);
            assert!(
                !text.contains(&literal),
                "{file} names the format {literal}"
            );
        }
    }
    let readme = read("docs/building.md");
    assert!(
        readme.contains(&format!("`--formats {all}`")),
        "docs/building.md's --formats row is not `--formats {all}`"
    );
}

/// The body of the shell function `name` in `script` (up to its closing
/// `}` at the start of a line).
fn shell_function<'a>(script: &'a str, name: &str) -> &'a str {
    let start = script
        .find(&format!("\n{name}() {{"))
        .unwrap_or_else(|| panic!("no function {name}"));
    let body = &script[start..];
    &body[..body.find("\n}\n").unwrap_or(body.len())]
}

#[test]
fn family_facts_are_written_only_in_families_toml() {
    // The env files and the [detect] markers: the wrapper's build and
    // install.sh's staging take them from pkg/families.toml, so neither
    // writes one of them itself.
    let spec = crate::spec::Spec::load(&root()).unwrap();
    let detect = &spec.families.detect;
    let facts = [
        &spec.families.deb.env_file,
        &spec.families.rpm.env_file,
        &detect.deb_marker,
        &detect.rpm_marker_dir,
    ];
    let mut sources = vec!["installer/install.sh".to_string()];
    sources.extend(
        repo_files()
            .into_iter()
            .filter(|f| f.starts_with("wrapper/src/") && f.ends_with(".rs")),
    );
    for source in &sources {
        for (n, line) in read(source).lines().enumerate() {
            for fact in facts {
                // A fact followed by more of a path names another file.
                let named = line.match_indices(fact.as_str()).any(|(at, _)| {
                    !line[at + fact.len()..].starts_with(|c: char| c == '/' || c.is_alphanumeric())
                });
                assert!(
                    !named,
                    "{source}:{}: writes {fact}, which it must take from pkg/families.toml",
                    n + 1
                );
            }
        }
    }

    // install.sh's detect_family follows the rule's steps in order.
    let installer = read("installer/install.sh");
    let body = shell_function(&installer, "detect_family");
    let steps = [
        "\"$root@DEB_ENV_FILE@\"",
        "\"$root@RPM_ENV_FILE@\"",
        "-f \"$root@DEB_MARKER@\"",
        "-d \"$root@RPM_MARKER_DIR@\"",
    ];
    let mut at = 0;
    for step in steps {
        let found = body[at..].find(step).unwrap_or_else(|| {
            panic!("install.sh's detect_family lacks (or misorders) {step}:\n{body}")
        });
        at += found;
    }
    // No other host path decides the family.
    for word in body.split(|c: char| c.is_whitespace() || c == '"') {
        if let Some(path) = word.strip_prefix("$root") {
            assert!(
                steps.iter().any(|s| s.contains(&format!("$root{path}\""))),
                "install.sh's detect_family looks at {path}, which the rule does not name"
            );
        }
    }
    // Staging fills every one of them in.
    let staged = String::from_utf8(crate::stage::installer(&spec).unwrap()).unwrap();
    for fact in facts {
        assert!(
            staged.contains(&format!("\"$root{fact}\"")),
            "the staged install.sh does not look at {fact}"
        );
    }
}

#[test]
fn the_installer_takes_exactly_the_paths_dist_stages() {
    // A path dist stages (stage.rs, check_path) is one the tarball's
    // install.sh accepts in its MANIFEST and SHA256SUMS and writes to, and
    // a path install.sh refuses is one dist never stages: the two rules are
    // run on the same cases, every printable ASCII character among them.
    let script = read("installer/install.sh");
    let safe_path = shell_function(&script, "safe_path");
    // The install manifest's paths are read by the same characters.
    let class = |text: &str, open: &str| -> String {
        let at = text
            .find(open)
            .unwrap_or_else(|| panic!("no {open} in install.sh"))
            + open.len();
        text[at..]
            .split(']')
            .next()
            .unwrap_or("")
            .replace("\\/", "/")
    };
    assert_eq!(
        class(safe_path, "*[!"),
        class(shell_function(&script, "check_records"), "p !~ /^\\/["),
        "install.sh: check_records' path characters are not safe_path's"
    );
    let mut cases: Vec<String> = [
        "/usr/bin/kubelet",
        "/etc/kubernetes/manifests",
        "/usr/lib/kubedist/kubelet/v1.38.0-rc.1/kubelet",
        "/var/lib/kubedist/.state.kubedist-tmp",
        "/opt/cni/bin/host-local",
        "/usr/share/bash-completion/completions/kubeadm",
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "//etc",
        "/etc//kubernetes",
        "/etc/./kubernetes",
        "/etc/../root",
        "/etc/..",
        "/etc/.",
        "/..",
        "/.",
        "/etc/...",
        "/etc/.hidden",
        "",
        "etc/kubernetes",
        "./etc",
        "../etc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for c in (0x20u8..0x7f).map(char::from) {
        cases.push(format!("/usr/a{c}b"));
        cases.push(format!("/usr/{c}"));
    }
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{safe_path}\n}}\nfor p; do if safe_path \"$p\"; then echo 1; else echo 0; fi; done"
        ))
        .arg("sh")
        .args(&cases)
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shell: Vec<bool> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l == "1")
        .collect();
    assert_eq!(shell.len(), cases.len());
    for (path, installer) in cases.iter().zip(shell) {
        let dist = crate::stage::check_path(path).is_ok();
        // The installer also reads relative names (SHA256SUMS, MANIFEST)
        // and directories with a trailing slash: those are dist's rule
        // applied to the absolute path.
        let absolute = match path.strip_suffix('/') {
            Some(dir) if path.starts_with('/') => dir.to_string(),
            _ if !path.starts_with('/') && !path.is_empty() => format!("/{path}"),
            _ => path.clone(),
        };
        let expected = dist || crate::stage::check_path(&absolute).is_ok();
        assert_eq!(
            installer, expected,
            "{path:?}: install.sh's safe_path says {installer}, dist's check_path {dist}"
        );
    }
}

#[test]
fn the_installer_and_kubedist_images_order_releases_alike() {
    // install.sh and kubedist-images each run alone on a node, so each has
    // its own copy of the version order and of a bundle's version: the same
    // text, and the order the one Kubernetes and kubedist use.
    let installer = read("installer/install.sh");
    let images = read("installer/images/kubedist-images");
    for name in ["version_older", "bundle_version", "image_repository_ok"] {
        assert_eq!(
            shell_function(&installer, name),
            shell_function(&images, name),
            "{name} differs between install.sh and kubedist-images"
        );
    }
    let ascending = [
        "1.36.3",
        "1.37.0-alpha.1",
        "1.37.0-alpha.2",
        "1.37.0-beta.0",
        "1.37.0-rc.0",
        "1.37.0-rc.1",
        "1.37.0",
        "1.37.2",
        "1.37.10",
        "1.38.0",
        "2.0.0",
    ];
    let older = shell_function(&installer, "version_older");
    for (i, a) in ascending.iter().enumerate() {
        for (j, b) in ascending.iter().enumerate() {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{older}\n}}\nversion_older \"$1\" \"$2\""))
                .args(["sh", a, b])
                .status()
                .expect("running sh");
            assert_eq!(out.success(), i < j, "version_older {a} {b}");
        }
    }
}

#[test]
fn an_image_repository_is_what_kubeadm_takes_as_imagerepository() {
    let installer = read("installer/install.sh");
    let ok = shell_function(&installer, "image_repository_ok");
    for (repo, expected) in [
        ("registry.example.internal/k8s", true),
        ("registry.k8s.io", true),
        ("localhost:5000/mirror/k8s", true),
        ("10.0.0.1:5000", true),
        ("registry.example.internal/k8s/", false),
        ("registry.example.internal/k8s:v1", false),
        ("Registry.example/k8s", false),
        ("registry.example/k8s@sha256:00", false),
        ("", false),
        ("-x/k8s", false),
        ("a b/k8s", false),
    ] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{ok}\n}}\nimage_repository_ok \"$1\""))
            .args(["sh", repo])
            .status()
            .expect("running sh");
        assert_eq!(out.success(), expected, "image_repository_ok {repo:?}");
    }
}

#[test]
fn the_installer_applies_the_kernel_prerequisites_as_the_packages_do() {
    // Written once, in pkg/scripts/kernel-apply; staging puts it in.
    let fragment = read("pkg/scripts/kernel-apply");
    assert!(fragment.contains("kernel_apply() {"));
    let installer = read("installer/install.sh");
    assert!(
        !installer.contains("kernel_apply() {"),
        "install.sh writes kernel_apply again"
    );
    let spec = crate::spec::Spec::load(&crate::util::repo_root()).unwrap();
    let staged = String::from_utf8(crate::stage::installer(&spec).unwrap()).unwrap();
    assert!(
        staged.contains(&fragment),
        "the staged install.sh lacks kernel_apply"
    );
    assert!(!staged.contains("@KERNEL_APPLY@"));
    for script in ["pkg/scripts/deb-postinst", "pkg/scripts/rpm-post"] {
        assert!(read(script).contains("@KERNEL_APPLY@"), "{script}");
    }
}
