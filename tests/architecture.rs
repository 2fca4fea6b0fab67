//! The crate's structure, checked against the code: the layer drawing of `README.md`
//! ("Architecture") names every subsystem of `src/` exactly once, each subsystem only uses its
//! own layer and the ones below it, and no files of `src/` import each other in a circle.
//!
//! It reads the sources as text: every `crate::`, `$crate::`, `super::` and `self::` path in
//! code, and every path that starts with a child module's name (`use fair::FairLock` in
//! `lock/mod.rs`), is resolved to the file of the longest module prefix it names; an item a
//! folder's `mod.rs` re-exports from a child (`crate::lock::LockGuard`) resolves to that child.
//! Comments and string literals are left out, so documentation links do not count. A path
//! through the crate root's re-exports (`crate::Lock` from inside the crate) is refused: code
//! names the module that defines an item, so that the root stays the top of the drawing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One source file: its module path (`[]` for `lib.rs`) and its code without comments and
/// string literals.
struct Source {
    module: Vec<String>,
    code: String,
}

fn sources() -> BTreeMap<PathBuf, Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&root).unwrap().to_path_buf();
                let module = module_of(&rel);
                let code = strip(&fs::read_to_string(&path).unwrap());
                files.insert(rel, Source { module, code });
            }
        }
    }
    files
}

/// `lib.rs` → `[]`, `a.rs` → `[a]`, `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a Rust source without its comments and the contents of its string and char
/// literals (a small lexer: enough for this crate's sources).
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && !is_ident(chars.get(i.wrapping_sub(1)))
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F}') or a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(j) => {
                    out.push_str("' '");
                    i = j + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// Every path the code names, as written (`crate`, `super` and `self` included, and relative
/// ones, which [`Modules::resolve`] keeps when they start with a child module), with the
/// groups of `use` statements expanded. A path inside an inline module (`mod tests { .. }`)
/// is written there: it starts with one `super` more than from the file's module, and comes
/// back as such.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let tokens = tokenize(code);
    // The brace depths at which inline modules opened.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push(depth);
            }
            _ => {}
        }
        if !inline.is_empty() && t == "super" {
            // `super` of an inline module: back to the file's module, then as written.
            let (mut inner, end) = path_at(&tokens, i + 2, vec!["self".into()]);
            found.append(&mut inner);
            i = end;
            continue;
        }
        let ident = t.chars().all(|c| c.is_alphanumeric() || c == '_');
        let starts = ident
            && (i == 0 || !matches!(tokens[i - 1].as_str(), "::" | "."))
            && tokens.get(i + 1).map(String::as_str) == Some("::");
        if starts {
            let (mut paths, end) = path_at(&tokens, i, Vec::new());
            found.append(&mut paths);
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// The path(s) starting at token `i` (after `prefix`), and the index after them.
fn path_at(tokens: &[String], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    loop {
        let Some(t) = tokens.get(i) else {
            return (vec![path], i);
        };
        if t == "{" {
            // A group: each member continues the path.
            let mut all = Vec::new();
            i += 1;
            loop {
                match tokens.get(i).map(String::as_str) {
                    None => return (all, i),
                    Some("}") => return (all, i + 1),
                    Some(",") => i += 1,
                    Some(_) => {
                        let (mut members, end) = path_at(tokens, i, path.clone());
                        all.append(&mut members);
                        i = end;
                        // Skip an `as name`.
                        if tokens.get(i).map(String::as_str) == Some("as") {
                            i += 2;
                        }
                    }
                }
            }
        }
        if t.chars().all(|c| c.is_alphanumeric() || c == '_') {
            path.push(t.clone());
            i += 1;
            if tokens.get(i).map(String::as_str) == Some("::") {
                i += 1;
                continue;
            }
        }
        return (vec![path], i);
    }
}

/// Identifiers, `::`, braces and commas; `$crate` is `crate`.
fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".into());
            i += 2;
        } else if matches!(c, '{' | '}' | ',') {
            tokens.push(c.to_string());
            i += 1;
        } else {
            if !c.is_whitespace() && c != '$' {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

/// What the crate's modules are: the file of each module path, and the items each folder's
/// face (`mod.rs`, `lib.rs`) re-exports from a child, by name.
struct Modules {
    files: BTreeMap<Vec<String>, PathBuf>,
    faces: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Modules {
    fn new(files: &BTreeMap<PathBuf, Source>) -> Self {
        let modules: BTreeMap<Vec<String>, PathBuf> = files
            .iter()
            .map(|(path, s)| (s.module.clone(), path.clone()))
            .collect();
        let mut faces = BTreeMap::new();
        // The root's re-exports are the public API, not a face: naming them is refused.
        for source in files.values().filter(|s| !s.module.is_empty()) {
            for statement in source.code.split(';') {
                let statement = statement.trim();
                let Some(used) = statement
                    .strip_prefix("pub use ")
                    .or_else(|| statement.strip_prefix("pub(crate) use "))
                else {
                    continue;
                };
                for path in paths(&format!("{used};")) {
                    let Some((item, module)) = path.split_last() else {
                        continue;
                    };
                    let mut child = source.module.clone();
                    child.extend(module.iter().cloned());
                    if module.len() == 1 && modules.contains_key(&child) {
                        faces.insert((source.module.clone(), item.clone()), child);
                    }
                }
            }
        }
        Self {
            files: modules,
            faces,
        }
    }

    /// The file a path written in `from` names: the longest module prefix that is a file of
    /// `src/` (through a face's re-export to the child that defines the item). `None` for a
    /// path outside the crate (`std::`, `redis::`) or one that stays in `from`.
    fn resolve(&self, path: &[String], from: &[String]) -> Option<PathBuf> {
        let mut module: Vec<String> = Vec::new();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => rest = &path[1..],
            Some("self") => {
                module = from.to_vec();
                rest = &path[1..];
            }
            Some("super") => {
                module = from.to_vec();
                while rest.first().map(String::as_str) == Some("super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = from.to_vec();
                child.push(first.to_owned());
                if !self.files.contains_key(&child) {
                    return None;
                }
                module = from.to_vec();
            }
            None => return None,
        }
        for seg in rest {
            let mut longer = module.clone();
            longer.push(seg.clone());
            if self.files.contains_key(&longer) {
                module = longer;
            } else if let Some(child) = self.faces.get(&(module.clone(), seg.clone())) {
                module = child.clone();
                break;
            } else {
                break;
            }
        }
        self.files.get(&module).cloned()
    }
}

/// The import graph: file → the files it names.
fn graph(files: &BTreeMap<PathBuf, Source>) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let modules = Modules::new(files);
    let mut edges = BTreeMap::new();
    for (path, source) in files {
        let mut to = BTreeSet::new();
        for p in paths(&source.code) {
            if let Some(target) = modules.resolve(&p, &source.module)
                && &target != path
            {
                to.insert(target);
            }
        }
        edges.insert(path.clone(), to);
    }
    edges
}

/// The subsystem of a file: its top module (`lib` for the root).
fn subsystem(path: &Path) -> String {
    let first = path.iter().next().unwrap().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The layers of the README's drawing, top first: each line of the `text` block under
/// "Architecture" starts with its subsystems, separated by ` · `, then at least two spaces
/// and what the layer does (an indented line goes on describing the one above).
fn readme_layers() -> Vec<Vec<String>> {
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("## Architecture")
        .nth(1)
        .expect("README.md has an \"## Architecture\" section");
    let block = section
        .split("```text")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the Architecture section has a ```text drawing");
    block
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(' '))
        .map(|l| {
            let names = l.split("  ").next().unwrap();
            names.split(" · ").map(|n| n.trim().to_owned()).collect()
        })
        .collect()
}

#[test]
fn no_file_of_src_imports_another_in_a_circle() {
    let edges = graph(&sources());
    let circles = strongly_connected(&edges);
    assert!(
        circles.is_empty(),
        "files that import each other in a circle: {circles:#?}"
    );
}

#[test]
fn the_drawing_names_every_subsystem_and_each_uses_only_its_layer_and_below() {
    let files = sources();
    let layers = readme_layers();
    let mut layer_of = BTreeMap::new();
    for (depth, names) in layers.iter().enumerate() {
        for name in names {
            assert!(
                layer_of.insert(name.clone(), depth).is_none(),
                "{name} is drawn twice"
            );
        }
    }
    let actual: BTreeSet<String> = files
        .keys()
        .map(|p| subsystem(p))
        .filter(|s| s != "lib")
        .collect();
    let drawn: BTreeSet<String> = layer_of.keys().cloned().collect();
    assert_eq!(
        drawn, actual,
        "the README's drawing and the subsystems of src/ differ"
    );
    let mut wrong = Vec::new();
    for (from, to) in graph(&files) {
        let a = subsystem(&from);
        for target in to {
            let b = subsystem(&target);
            if b == "lib" && a != "lib" {
                wrong.push(format!(
                    "{} names the crate root's re-exports (name the defining module)",
                    from.display()
                ));
                continue;
            }
            if a == "lib" || a == b {
                continue;
            }
            // Layers are listed top first: a larger index is lower.
            if layer_of[&a] > layer_of[&b] {
                wrong.push(format!(
                    "{} ({a}) uses {} ({b}), a higher layer",
                    from.display(),
                    target.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_reader_finds_the_imports_it_must() {
    // The lexer drops comments and strings, the paths resolve through groups and `super`.
    let code =
        strip("use crate::a::{b::C, d};\n// crate::x::Y\nlet s = \"crate::z\";\nsuper::e::f();");
    let found = paths(&code);
    assert!(found.contains(&vec!["crate".into(), "a".into(), "b".into(), "C".into()]));
    assert!(found.contains(&vec!["crate".into(), "a".into(), "d".into()]));
    assert!(found.contains(&vec!["super".into(), "e".into(), "f".into()]));
    assert!(!found.iter().any(|p| p.contains(&"x".to_string())));
    assert!(!found.iter().any(|p| p.contains(&"z".to_string())));
    // And on the crate itself: the lock surface is named by the lock kinds.
    let files = sources();
    let edges = graph(&files);
    let reentrant = &edges[Path::new("lock/reentrant.rs")];
    assert!(
        reentrant.contains(Path::new("lock/surface.rs")),
        "{reentrant:?}"
    );
    assert!(
        reentrant.contains(Path::new("hold/kind.rs")),
        "{reentrant:?}"
    );
    // `lock/mod.rs` re-exports the kinds: its uses of its children count.
    assert!(edges[Path::new("lock/mod.rs")].contains(Path::new("lock/fair.rs")));
}

/// The circles of a graph (Tarjan's strongly connected components of two or more files).
fn strongly_connected(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        next: usize,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.edges.contains_key(w) {
                continue;
            }
            let w = s.edges.get_key_value(w).unwrap().0;
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// `cargo test --test architecture dump -- --ignored --nocapture`: the import graph, a file a
/// line, for looking at what the checks saw.
#[test]
#[ignore]
fn dump() {
    for (from, to) in graph(&sources()) {
        let to: Vec<String> = to.iter().map(|p| p.display().to_string()).collect();
        println!("{} -> {}", from.display(), to.join(" "));
    }
}

/// The README is a front page (issue 25): at most 10 KB; the manual is the guide.
#[test]
fn the_readme_is_a_front_page_of_at_most_10_kb() {
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    assert!(
        readme.len() <= 10_000,
        "README.md is {} bytes: move detail into the guide (docs/guide/)",
        readme.len()
    );
}
