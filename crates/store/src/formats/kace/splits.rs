//! KACE's published splits: a folder with one subfolder per split, each
//! holding a training and a testing file in the colocation form.

use std::path::{Path, PathBuf};

use super::colocations::{read_colocations, ColocationImport};
use crate::error::StoreError;

/// A split's training colocations, in each subfolder of a splits folder.
pub const TRAINING_FILE: &str = "training_set.csv";

/// A split's testing colocations, beside [`TRAINING_FILE`].
pub const TESTING_FILE: &str = "testing_set.csv";

/// One published split of KACE's colocations.
#[derive(Debug, Clone, PartialEq)]
pub struct KaceSplit {
    /// The subfolder's name, e.g. `rand10`.
    pub name: String,
    /// The subfolder; it holds [`TRAINING_FILE`] and [`TESTING_FILE`].
    pub folder: PathBuf,
    /// The colocations of [`TRAINING_FILE`].
    pub training: ColocationImport,
    /// The colocations of [`TESTING_FILE`].
    pub testing: ColocationImport,
}

/// Reads every subfolder of `dir` that holds both [`TRAINING_FILE`] and
/// [`TESTING_FILE`] (others are skipped), in name order, each file as by
/// [`read_colocations`]. A folder without such a subfolder is an error.
pub fn read_splits(dir: &Path) -> Result<Vec<KaceSplit>, StoreError> {
    let io_error = |cause| StoreError::io(dir, cause);
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let folder = entry.map_err(io_error)?.path();
        if folder.join(TRAINING_FILE).is_file() && folder.join(TESTING_FILE).is_file() {
            folders.push(folder);
        }
    }
    if folders.is_empty() {
        return Err(io_error(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no subfolder holds {TRAINING_FILE} and {TESTING_FILE}"),
        )));
    }
    folders.sort();
    folders
        .into_iter()
        .map(|folder| {
            Ok(KaceSplit {
                name: folder.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
                training: read_colocations(&folder.join(TRAINING_FILE))?,
                testing: read_colocations(&folder.join(TESTING_FILE))?,
                folder,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::kace::fixtures::{assert_names, fixture, render};

    #[test]
    fn reads_real_kace_splits() {
        let Some(dir) = tessera_testkit::shared_data("kace") else { return };
        let splits = read_splits(&dir.join("splits/n_occur_3")).unwrap();
        let names: Vec<&str> = splits.iter().map(|split| split.name.as_str()).collect();
        assert_eq!(names, ["rand10", "rand20", "rand30", "rand40", "rand50"]);
        let (training, testing) = (&splits[0].training, &splits[0].testing);
        assert_eq!((training.rows.len(), training.skipped_unmeasured), (40, 0));
        assert_eq!(testing.rows.len(), 141);
    }

    #[test]
    fn splits_are_the_subfolders_with_both_files_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let pairs = |n: usize| {
            let (columns, rows) = fixture(2, n);
            render(&columns, &rows)
        };
        for (name, files) in [("b", vec![TRAINING_FILE, TESTING_FILE]), ("a", vec![TRAINING_FILE, TESTING_FILE])] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            for (n, file) in files.into_iter().enumerate() {
                std::fs::write(dir.path().join(name).join(file), pairs(n + 1)).unwrap();
            }
        }
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c").join(TRAINING_FILE), pairs(1)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a split").unwrap();
        let splits = read_splits(dir.path()).unwrap();
        let summary: Vec<(&str, usize, usize)> =
            splits.iter().map(|s| (s.name.as_str(), s.training.rows.len(), s.testing.rows.len())).collect();
        assert_eq!(summary, [("a", 1, 2), ("b", 1, 2)]);
        assert_eq!(splits[0].folder, dir.path().join("a"));

        std::fs::write(dir.path().join("b").join(TESTING_FILE), "w1_Threads\n1\n").unwrap();
        let message = read_splits(dir.path()).unwrap_err().to_string();
        assert_names(&message, &["testing_set.csv:1:", "at least 2"]);
        let message = read_splits(&dir.path().join("c")).unwrap_err().to_string();
        assert_names(&message, &["c: no subfolder holds training_set.csv and testing_set.csv"]);
        let message = read_splits(&dir.path().join("absent")).unwrap_err().to_string();
        assert_names(&message, &["absent: No such file or directory"]);
    }
}
