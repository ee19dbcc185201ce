//! The shipped declarations, loaded from the repository.

use std::path::{Path, PathBuf};

use stream_declarations::LoadedDeclaration;

pub fn repo_declarations() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations")
}

pub fn declarations(name: &str) -> LoadedDeclaration {
    LoadedDeclaration::load(&repo_declarations().join(name)).unwrap()
}

/// A copy of the shipped folder inside `dir`, for tests that edit it.
pub fn copy_declarations(dir: &Path) -> PathBuf {
    let from = repo_declarations();
    let to = dir.join("declarations");
    std::fs::create_dir_all(to.join("prompts")).unwrap();
    let files = std::fs::read_dir(&from)
        .unwrap()
        .chain(std::fs::read_dir(from.join("prompts")).unwrap());
    for entry in files {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.strip_prefix(&from).unwrap())).unwrap();
        }
    }
    to
}
