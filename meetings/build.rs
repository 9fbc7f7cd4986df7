//! Links the PocketSphinx speech recognizer (Debian `libpocketsphinx-dev` and
//! `libsphinxbase-dev`, 0.8+5prealpha), whose functions `src/speech.rs`
//! declares by hand. Without the libraries the link fails naming them.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=pocketsphinx");
    println!("cargo:rustc-link-lib=sphinxbase");
}
