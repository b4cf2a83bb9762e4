//! docs/DESIGN.md's layer table names every source file of the core: a new file without a line
//! there fails this test.

use std::path::Path;

fn sources(dir: &Path, root: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_layer_table_lists_every_file_of_core_src() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(core.join("../docs/DESIGN.md")).unwrap();
    let table: Vec<&str> = design
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut files = Vec::new();
    sources(&core.join("src"), &core.join("src"), &mut files);
    files.sort();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !table.contains(&f.as_str()) && f.as_str() != "lib.rs")
        .collect();
    assert!(
        missing.is_empty(),
        "add these files to the layer table of docs/DESIGN.md: {missing:?}"
    );
}

#[test]
fn the_spec_error_table_matches_the_error_codes() {
    use tenure::ErrorCode;
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = std::fs::read_to_string(core.join("../docs/SPEC.md")).unwrap();
    let rows: Vec<Vec<String>> = spec
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("TENURE_"))
        .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
        .collect();
    let codes = ErrorCode::ALL;
    assert_eq!(rows.len(), codes.len(), "one row per code");
    for (row, code) in rows.iter().zip(codes) {
        assert_eq!(row[1], (code as i32).to_string(), "{row:?}");
        assert_eq!(row[3], format!("`{}`", code.name()), "{row:?}");
        // The Rust variant of the row maps to this code.
        let variant = row[2].trim_matches('`');
        if !variant.starts_with('(') {
            assert_eq!(format!("{code:?}"), variant, "{row:?}");
        }
    }
}

/// The module path of a file of `core/src` (`kv/mod.rs` → `kv`, `lib.rs` → the root).
fn module_of(file: &str) -> Vec<String> {
    let mut path: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if path.last().is_some_and(|p| p == "mod" || p == "lib") {
        path.pop();
    }
    path
}

/// The names the crate root re-exports (`pub use crate::a::b::{X, Y as Z}`) → their module.
fn root_exports(lib: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for item in lib.split("pub use crate::").skip(1) {
        let item = &item[..item.find(';').unwrap()];
        let (module, names) = match item.find("::{") {
            Some(i) => (&item[..i], item[i + 3..].trim_end_matches('}')),
            None => item.rsplit_once("::").unwrap(),
        };
        let module: Vec<String> = module.split("::").map(String::from).collect();
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap().trim();
            if !name.is_empty() {
                out.push((name.to_string(), module.clone()));
            }
        }
    }
    out
}

/// The files a source file imports: every `crate::…` and `super::…` path in its code (comments
/// and the `#[cfg(test)]` module left out), resolved to the longest module prefix that is a file.
fn imports(
    file: &str,
    src: &str,
    files: &[String],
    exports: &[(String, Vec<String>)],
) -> Vec<String> {
    let code = src.split("#[cfg(test)]\nmod ").next().unwrap();
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let me = module_of(file);
    let module_file = |path: &[String]| {
        (1..=path.len()).rev().find_map(|n| {
            files
                .iter()
                .find(|f| f.as_str() != "lib.rs" && module_of(f) == path[..n])
                .cloned()
        })
    };
    let mut out = Vec::new();
    for base in ["crate::", "super::"] {
        for (at, _) in code.match_indices(base) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + base.len()..];
            // `super::{a, b}` names the parent module itself; `crate::{…}` would hide its files.
            assert!(
                !(base == "crate::" && rest.starts_with('{')),
                "{file}: write one `crate::` path per item so this test can read it"
            );
            let path: Vec<String> = rest
                .split("::")
                .map(|seg| {
                    seg.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|seg| !seg.is_empty())
                .collect();
            let mut full = if base == "crate::" {
                Vec::new()
            } else {
                me[..me.len().saturating_sub(1)].to_vec()
            };
            full.extend(path);
            // A name re-exported at the crate root, imported from there, is an arrow to lib.rs
            // (the top of the house), whichever file defines it: import it from its module.
            let target = module_file(&full).or_else(|| {
                exports
                    .iter()
                    .any(|(n, _)| Some(n) == full.first())
                    .then(|| "lib.rs".to_string())
            });
            if let Some(t) = target.filter(|t| t != file) {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

#[test]
fn every_import_of_core_src_points_down_the_layer_table() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(core.join("../docs/DESIGN.md")).unwrap();
    let block = design.split("```\ncore/src/\n").nth(1).unwrap();
    let block = &block[..block.find("```").unwrap()];
    let order: Vec<&str> = block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut files = Vec::new();
    sources(&core.join("src"), &core.join("src"), &mut files);
    let lib = std::fs::read_to_string(core.join("src/lib.rs")).unwrap();
    let exports = root_exports(&lib);
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| f.as_str() != "lib.rs") {
        let Some(at) = order.iter().position(|o| o == file) else {
            continue; // the listing test reports it
        };
        let own_mod = match file.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/mod.rs"),
            None => String::new(),
        };
        let src = std::fs::read_to_string(core.join("src").join(file)).unwrap();
        for dep in imports(file, &src, &files, &exports) {
            let below = order.iter().position(|o| *o == dep).is_some_and(|d| d < at);
            if !below && dep != own_mod {
                wrong.push(format!("{file} → {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports up the layer table of docs/DESIGN.md (list bottom-up; a file imports only \
         files above it and its folder's mod.rs): {wrong:?}"
    );
}

#[test]
fn the_import_reader_sees_an_arrow_up() {
    // Guards the test above against reading nothing: a made-up lowest file that imports the
    // handle is caught.
    let files = vec!["handle.rs".to_string(), "limits/mod.rs".to_string()];
    let exports = vec![("Tenure".to_string(), vec!["handle".to_string()])];
    let src = "use crate::handle::Tenure;\n// use crate::nothing;\n";
    assert_eq!(
        imports("limits/mod.rs", src, &files, &exports),
        vec!["handle.rs".to_string()]
    );
    // A name taken from the crate root is an arrow to lib.rs, above every file.
    let src = "use crate::Tenure;\n";
    assert_eq!(
        imports("limits/mod.rs", src, &files, &exports),
        vec!["lib.rs".to_string()]
    );
    let nested = "use super::check::x;\n";
    let files = vec!["limits/check.rs".to_string(), "limits/mod.rs".to_string()];
    assert_eq!(
        imports("limits/mod.rs", nested, &files, &[]),
        Vec::<String>::new(),
        "limits/mod.rs's super is the root: not a file of limits"
    );
}

/// The file lines of one block of DESIGN.md's layer table: the lines after `header` (a line of
/// its own) that are indented, first word each.
fn layer_block<'a>(design: &'a str, header: &str) -> Vec<&'a str> {
    design
        .lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn the_layer_table_lists_every_file_of_server_src() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(core.join("../docs/DESIGN.md")).unwrap();
    let block = layer_block(&design, "server/src/");
    assert!(
        !block.is_empty(),
        "DESIGN.md's layer table has no server/src/ block"
    );
    let server = core.join("../server/src");
    let mut files = Vec::new();
    sources(&server, &server, &mut files);
    files.sort();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !block.contains(&f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "add these files to the server/src/ block of DESIGN.md's layer table: {missing:?}"
    );
    let stale: Vec<&&str> = block
        .iter()
        .filter(|l| !files.iter().any(|f| f == *l))
        .collect();
    assert!(
        stale.is_empty(),
        "DESIGN.md lists server files that do not exist: {stale:?}"
    );
}

/// Every `Mutex`, `RwLock` and `Condvar` (the crate's `locks::` ones and std's) held in a field
/// of a struct in `core/src`, outside unit tests, as `(module, Type::field)`; a type alias of
/// one counts under its own name. `module` is the file's stem (its folder for `mod.rs`).
fn lock_fields(core_src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(core_src, core_src, &mut files);
    let mut found = Vec::new();
    for file in files {
        // The wrapper itself holds std's locks; that is what it is for.
        if file == "locks.rs" {
            continue;
        }
        let path = Path::new(&file);
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let module = if stem == "mod" {
            let parent = path.parent().unwrap().file_name().unwrap();
            parent.to_string_lossy().into_owned()
        } else {
            stem
        };
        let text = std::fs::read_to_string(core_src.join(&file)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut owner: Option<String> = None;
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim();
            if t == "#[cfg(test)]" && lines.get(i + 1).is_some_and(|n| n.trim() == "mod tests {") {
                break;
            }
            if t.starts_with("//") {
                continue;
            }
            let t = strip_visibility(t);
            // A field belongs to the last struct (or enum, for a variant's fields) declared.
            if let Some(rest) = t
                .strip_prefix("struct ")
                .or_else(|| t.strip_prefix("enum "))
            {
                owner = Some(ident(rest).to_string());
                continue;
            }
            if let Some(rest) = t.strip_prefix("type ") {
                let (name, ty) = rest.split_once('=').unwrap_or((rest, ""));
                if holds_a_lock(ty) {
                    found.push((module.clone(), ident(name).to_string()));
                }
                continue;
            }
            // A field: `name: Type,` (an initialiser `name: Mutex::new(..)` is not a type, nor
            // is a borrowed parameter `name: &Mutex<..>`).
            let Some((name, ty)) = t.split_once(": ") else {
                continue;
            };
            let is_ident =
                !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            if is_ident
                && ty.ends_with(',')
                && !ty.starts_with('&')
                && !ty.contains("::new")
                && holds_a_lock(ty)
            {
                let owner = owner
                    .clone()
                    .unwrap_or_else(|| panic!("{file}: field {name} outside a struct"));
                found.push((module.clone(), format!("{owner}::{name}")));
            }
        }
    }
    found
}

fn strip_visibility(t: &str) -> &str {
    for p in ["pub(crate) ", "pub(super) ", "pub "] {
        if let Some(rest) = t.strip_prefix(p) {
            return rest;
        }
    }
    t
}

fn ident(s: &str) -> &str {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Whether a type names a lock: `Mutex<..>` or `RwLock<..>` (bare, `locks::`, `std::sync::`,
/// or inside `Arc<..>`), or a `Condvar`. The recipe `sync::Mutex` takes no type parameter.
fn holds_a_lock(ty: &str) -> bool {
    let starts_word = |at: usize| {
        ty[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    };
    let ends_word = |at: usize| {
        ty[at..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
    };
    ["Mutex<", "RwLock<"]
        .iter()
        .any(|w| ty.match_indices(w).any(|(at, _)| starts_word(at)))
        || ty
            .match_indices("Condvar")
            .any(|(at, _)| starts_word(at) && ends_word(at + "Condvar".len()))
}

#[test]
fn the_lock_table_lists_every_lock_of_core_src() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(core.join("../docs/DESIGN.md")).unwrap();
    let table: String = design
        .lines()
        .skip_while(|l| *l != "## Locking")
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        table.contains("| lock |"),
        "DESIGN.md's lock table not found"
    );
    let fields = lock_fields(&core.join("src"));
    // The engine's state, the stop token's lock and the watcher's error at least: a parser
    // that finds nothing would pass vacuously.
    for known in [
        "Shared::state",
        "Inner::lock",
        "WatchShared::error",
        "Shared::done_cv",
    ] {
        assert!(
            fields.iter().any(|(_, f)| f == known),
            "{known} not found: {fields:?}"
        );
    }
    let missing: Vec<String> = fields
        .iter()
        .filter_map(|(module, field)| {
            let shared_name = fields.iter().filter(|(_, f)| f == field).count() > 1;
            let name = if shared_name {
                format!("{module}::{field}")
            } else {
                field.clone()
            };
            (!table.contains(&format!("`{name}`"))).then_some(name)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "add these locks to the lock table of docs/DESIGN.md (what they guard, who takes \
         them): {missing:?}"
    );
}
