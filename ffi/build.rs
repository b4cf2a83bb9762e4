//! Gives libtenure.so a SONAME on Linux, so installed copies can be versioned
//! (`libtenure.so.0.1` for 0.x releases, `libtenure.so.MAJOR` from 1.0 on).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_else(|_| "0".into());
    let soname = if major == "0" {
        format!("libtenure.so.0.{minor}")
    } else {
        format!("libtenure.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
}
