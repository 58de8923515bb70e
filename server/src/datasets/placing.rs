//! A finished recording's parts put in place as its episode's file, once,
//! however many instances finish it (cluster mode, a shared data
//! directory) and whatever stops half-way (a crash, a failed row write).
//!
//! The parts stay until the episode's row is written (`remove_parts`): a
//! recording whose episode could not be made is tried again by the
//! recorder's janitor (`relay::recording::tidy`), which finds its parts.

use crate::relay::recording::join_parts;
use std::io::ErrorKind::{AlreadyExists, NotFound};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `place_recording` found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The parts are the episode's file now (put there by this call).
    Placed,
    /// An episode's file was there already: another instance placed it,
    /// or an earlier try got no further than placing it.
    Found,
    /// A part was gone: another instance took the recording.
    Taken,
}

/// Links the one part, or the parts joined into a file of their own, as
/// `episode`, only if no file is there. Nothing is ever overwritten or
/// renamed over, so two instances finishing the same recording make one
/// episode. The parts stay.
pub fn place_recording(parts: &[PathBuf], episode: &Path) -> std::io::Result<Placement> {
    let settled = |result: std::io::Result<()>| match result {
        Ok(()) => Ok(Placement::Placed),
        Err(e) if e.kind() == AlreadyExists => Ok(Placement::Found),
        Err(e) if e.kind() == NotFound => Ok(Placement::Taken),
        Err(e) => Err(e),
    };
    if episode.exists() {
        return Ok(Placement::Found);
    }
    let joined = match parts {
        [_] => None,
        _ => {
            let joining = joining_file(episode);
            match join_parts(parts, &joining) {
                Ok(()) => Some(joining),
                Err(e) => return settled(Err(e)),
            }
        }
    };
    let source = joined.as_deref().unwrap_or(&parts[0]);
    let placed = match std::fs::hard_link(source, episode) {
        Err(e) if !matches!(e.kind(), AlreadyExists | NotFound) => {
            // A filesystem without links (some shared mounts): the parts
            // themselves copied into place.
            settled(join_parts(parts, episode))
        }
        linked => settled(linked),
    };
    if let Some(joining) = &joined {
        let _ = std::fs::remove_file(joining);
    }
    placed
}

/// Deletes the parts once their episode's row is written.
pub fn remove_parts(parts: &[PathBuf]) {
    for part in parts {
        match std::fs::remove_file(part) {
            Ok(()) => {}
            Err(e) if e.kind() == NotFound => {}
            Err(e) => tracing::warn!(part = %part.display(), error = %e, "a recording's part could not be deleted once its episode was made"),
        }
    }
}

/// Whether nothing was written to `file` for `quiet`: an episode file
/// found in place is read only then, as the instance that placed it may
/// still be writing it (on a filesystem without links). A linked file was
/// whole before it was linked, whatever its age.
pub fn quiet_for(file: &Path, quiet: Duration) -> bool {
    std::fs::metadata(file).and_then(|m| m.modified()).is_ok_and(|at| at.elapsed().is_ok_and(|age| age >= quiet))
}

/// Whether the episode's file in place is shorter than the parts it is
/// made of (those still there): a copy cut short, by an instance that died
/// mid-copy on a filesystem without links. (A part linked, or parts
/// joined, are at least as long.)
pub fn cut_short(episode: &Path, parts: &[PathBuf]) -> bool {
    let size = |file: &Path| std::fs::metadata(file).map_or(0, |m| m.len());
    size(episode) < parts.iter().map(|part| size(part)).sum()
}

/// Where parts are joined before they are linked into place: beside the
/// episode, named so `sweep_joining` knows it.
fn joining_file(episode: &Path) -> PathBuf {
    episode.with_extension(format!("{JOINING}{:016x}", rand::random::<u64>()))
}

const JOINING: &str = "joining-";

/// Deletes joining files under `datasets` (`<org>/episodes/`) that nothing
/// was written to for `quiet`: an instance that died mid-join leaves one;
/// one that is joining now writes to it. Run at start.
pub fn sweep_joining(datasets: &Path, quiet: Duration) -> usize {
    let Ok(orgs) = std::fs::read_dir(datasets) else { return 0 };
    let mut swept = 0;
    for org in orgs.filter_map(Result::ok) {
        let Ok(files) = std::fs::read_dir(org.path().join("episodes")) else { continue };
        for file in files.filter_map(Result::ok) {
            let path = file.path();
            let joining = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.starts_with(JOINING));
            if joining && quiet_for(&path, quiet) && std::fs::remove_file(&path).is_ok() {
                swept += 1;
            }
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording's two parts in `dir`, "one" then "two".
    fn two_parts(dir: &Path) -> (PathBuf, PathBuf) {
        let (a, b) = (dir.join("s.1-a.part"), dir.join("s.2-b.part"));
        std::fs::write(&a, "one\n").unwrap();
        std::fs::write(&b, "two\n").unwrap();
        (a, b)
    }

    /// Two instances that both finish a session's recording make one
    /// episode: the first to put its parts in place wins, the other changes
    /// nothing; no joining file is left behind; the parts stay for the
    /// caller to delete once the episode's row is written.
    #[test]
    fn a_recordings_parts_become_one_episode_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_parts(dir.path());
        let episode = dir.path().join("episodes").join("s.jsonl");
        std::fs::create_dir_all(episode.parent().unwrap()).unwrap();
        let parts = vec![a.clone(), b.clone()];
        assert_eq!(place_recording(&parts, &episode).unwrap(), Placement::Placed);
        assert_eq!(std::fs::read_to_string(&episode).unwrap(), "one\ntwo\n");
        assert!(a.exists() && b.exists(), "the parts stay until the row is written");
        assert_eq!(place_recording(&parts, &episode).unwrap(), Placement::Found, "a second finisher finds it");

        std::fs::write(&b, "late\n").unwrap();
        assert_eq!(place_recording(std::slice::from_ref(&b), &episode).unwrap(), Placement::Found, "an episode is never overwritten");
        assert_eq!(std::fs::read_to_string(&episode).unwrap(), "one\ntwo\n");
        remove_parts(&parts);
        assert!(!a.exists() && !b.exists());
        let other = dir.path().join("episodes").join("t.jsonl");
        assert_eq!(place_recording(&parts, &other).unwrap(), Placement::Taken, "parts another instance took");
        assert_eq!(place_recording(std::slice::from_ref(&a), &other).unwrap(), Placement::Taken);
        let names: Vec<_> = std::fs::read_dir(episode.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["s.jsonl"], "no joining file is left");
    }

    /// A copy cut short is told from a whole one.
    #[test]
    fn an_episode_cut_short_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_parts(dir.path());
        let episode = dir.path().join("s.jsonl");
        std::fs::write(&episode, "one\ntw").unwrap();
        assert!(cut_short(&episode, &[a.clone(), b.clone()]));
        std::fs::write(&episode, "one\ntwo\n").unwrap();
        assert!(!cut_short(&episode, &[a, b]));
        assert!(!cut_short(&episode, &[]), "parts taken: nothing to tell by");
    }

    /// A joining file left by an instance that died mid-join is swept at
    /// start; one being written now (not quiet yet) and episodes are not.
    #[test]
    fn a_joining_file_left_by_a_crash_is_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let episodes = dir.path().join("org-1").join("episodes");
        std::fs::create_dir_all(&episodes).unwrap();
        let left = joining_file(&episodes.join("s.jsonl"));
        std::fs::write(&left, "half").unwrap();
        std::fs::write(episodes.join("t.jsonl"), "whole\n").unwrap();
        assert_eq!(sweep_joining(dir.path(), Duration::from_secs(3600)), 0, "a join may still be going on");
        assert!(left.exists());
        assert_eq!(sweep_joining(dir.path(), Duration::ZERO), 1);
        let names: Vec<_> = std::fs::read_dir(&episodes).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["t.jsonl"]);
    }
}
