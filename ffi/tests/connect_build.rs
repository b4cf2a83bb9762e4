//! `tenure_connect` by build: the full library (feature `remote`, the default) parses the URL
//! and connects; the lean one (`--no-default-features`, `make install REMOTE=0`) keeps the
//! symbol and answers `TENURE_ERR_UNSUPPORTED`, after the same NULL checks.

use std::ffi::{CStr, CString};
use std::ptr;

use tenure::{
    tenure_close, tenure_connect, tenure_last_error_message, TENURE_ERR_INVALID_ARGUMENT,
    TENURE_ERR_NULL_POINTER,
};

fn last_error() -> String {
    unsafe { CStr::from_ptr(tenure_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn null_arguments_are_refused_first_in_every_build() {
    let url = CString::new("http://127.0.0.1:1").unwrap();
    let rc = unsafe { tenure_connect(url.as_ptr(), ptr::null(), ptr::null_mut()) };
    assert_eq!(rc, TENURE_ERR_NULL_POINTER);
    let mut db = ptr::null_mut();
    let rc = unsafe { tenure_connect(ptr::null(), ptr::null(), &mut db) };
    assert_eq!(rc, TENURE_ERR_NULL_POINTER);
    assert!(db.is_null());
    let bad = [0xffu8, 0];
    let rc = unsafe { tenure_connect(bad.as_ptr().cast(), ptr::null(), &mut db) };
    assert_eq!(rc, TENURE_ERR_INVALID_ARGUMENT, "{}", last_error());
    assert!(db.is_null());
}

#[cfg(feature = "remote")]
#[test]
fn the_full_build_parses_the_url() {
    let url = CString::new("ftp://127.0.0.1:1").unwrap();
    let mut db = ptr::null_mut();
    let rc = unsafe { tenure_connect(url.as_ptr(), ptr::null(), &mut db) };
    assert_eq!(rc, TENURE_ERR_INVALID_ARGUMENT, "{}", last_error());
    assert!(db.is_null());
    unsafe { tenure_close(db) };
}

#[cfg(not(feature = "remote"))]
#[test]
fn the_lean_build_answers_unsupported_and_says_why() {
    let url = CString::new("http://127.0.0.1:2379").unwrap();
    let mut db = ptr::null_mut();
    let rc = unsafe { tenure_connect(url.as_ptr(), ptr::null(), &mut db) };
    assert_eq!(rc, tenure::TENURE_ERR_UNSUPPORTED);
    assert!(db.is_null(), "out is written only on success");
    let message = last_error();
    assert!(
        message.starts_with("tenure_connect: cannot connect to http://127.0.0.1:2379")
            && message.contains("without the network client (REMOTE=0"),
        "{message}"
    );
    unsafe { tenure_close(db) };
}
