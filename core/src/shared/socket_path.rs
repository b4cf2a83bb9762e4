//! Where the owner of a shared file listens (SPEC P7): `<file>.sock` beside the file, or, when
//! that path does not fit in `sun_path`, a place derived from the file's canonical path that
//! every process computes alike. Pure: the environment comes in as arguments.

use std::path::{Path, PathBuf};

/// The longest socket path the kernel takes: `sun_path` is 108 bytes with its NUL.
pub(crate) const SUN_PATH_MAX: usize = 107;

/// The socket of the database whose canonical path is `file`: `<file>.sock` when it fits,
/// else `$XDG_RUNTIME_DIR/tenure-<hash>.sock` (`runtime_dir`, when set, absolute and short
/// enough), else `/tmp/tenure-<uid>/<hash>.sock`. `<hash>` is 16 hex digits of the canonical
/// path's FNV-1a hash.
pub(crate) fn socket_path(file: &Path, runtime_dir: Option<&Path>, uid: u32) -> PathBuf {
    let mut beside = file.as_os_str().to_owned();
    beside.push(".sock");
    let beside = PathBuf::from(beside);
    if fits(&beside) {
        return beside;
    }
    let hash = format!("{:016x}", fnv1a(file.as_os_str().as_encoded_bytes()));
    if let Some(dir) = runtime_dir.filter(|d| d.is_absolute()) {
        let p = dir.join(format!("tenure-{hash}.sock"));
        if fits(&p) {
            return p;
        }
    }
    fallback_dir(uid).join(format!("{hash}.sock"))
}

/// The directory of the last fallback, which the owner creates with mode 0700.
pub(crate) fn fallback_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/tenure-{uid}"))
}

fn fits(p: &Path) -> bool {
    p.as_os_str().len() <= SUN_PATH_MAX
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(n: usize) -> PathBuf {
        PathBuf::from(format!("/{}", "d".repeat(n)))
    }

    #[test]
    fn p7_a_short_path_gets_its_socket_beside_the_file() {
        let f = Path::new("/srv/app/jobs.tenure");
        assert_eq!(
            socket_path(f, Some(Path::new("/run/user/1000")), 1000),
            Path::new("/srv/app/jobs.tenure.sock")
        );
    }

    #[test]
    fn p7_the_longest_path_that_fits_stays_beside_the_file() {
        // 107 bytes with ".sock": the limit itself fits.
        let f = long(SUN_PATH_MAX - 1 - 5);
        let s = socket_path(&f, None, 0);
        assert_eq!(s.as_os_str().len(), SUN_PATH_MAX);
        assert!(s.starts_with(f.parent().unwrap()), "{s:?}");
        let g = long(SUN_PATH_MAX - 5);
        assert!(socket_path(&g, None, 0).starts_with("/tmp/tenure-0"));
    }

    #[test]
    fn p7_a_long_path_falls_back_to_the_runtime_dir_then_tmp() {
        let f = long(200);
        let xdg = socket_path(&f, Some(Path::new("/run/user/1000")), 1000);
        assert!(xdg.starts_with("/run/user/1000"), "{xdg:?}");
        let name = xdg.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("tenure-") && name.ends_with(".sock"),
            "{name}"
        );
        assert_eq!(name.len(), "tenure-".len() + 16 + ".sock".len());
        let tmp = socket_path(&f, None, 1000);
        assert_eq!(tmp.parent().unwrap(), Path::new("/tmp/tenure-1000"));
        // A relative or over-long runtime dir is not used.
        assert_eq!(socket_path(&f, Some(Path::new("run")), 1000), tmp);
        assert_eq!(socket_path(&f, Some(&long(120)), 1000), tmp);
    }

    #[test]
    fn p7_every_process_derives_the_same_place_and_other_files_another() {
        let f = long(300);
        assert_eq!(socket_path(&f, None, 7), socket_path(&f, None, 7));
        let mut other = f.clone().into_os_string();
        other.push("x");
        assert_ne!(
            socket_path(&f, None, 7),
            socket_path(Path::new(&other), None, 7)
        );
        assert!(socket_path(&f, None, 7).as_os_str().len() <= SUN_PATH_MAX);
    }
}
