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
