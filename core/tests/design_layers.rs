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
