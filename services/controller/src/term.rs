//! The term: a number that grows with every new primary and never goes
//! back, not even across restarts.
//!
//! etcd holds the cluster's last issued term and a campaign bumps it in the
//! same transaction that takes the leader key. Each node also remembers the
//! highest term it has seen in a small file, so that neither its own
//! reports nor the next term it campaigns for can fall behind what it has
//! already seen, should the etcd data ever be lost or restored from an old
//! backup.

use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TermError {
    #[error("cannot read the term file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the term file {path} does not hold a number: {text:?}")]
    Corrupt { path: PathBuf, text: String },
    #[error("cannot write the term file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The highest term this node has seen, persisted when a path is given.
#[derive(Debug)]
pub struct TermStore {
    path: Option<PathBuf>,
    highest: u64,
}

impl TermStore {
    /// Opens (or starts) the store; `None` keeps it in memory.
    pub fn open(path: Option<PathBuf>) -> Result<TermStore, TermError> {
        let mut highest = 0;
        if let Some(p) = &path {
            match std::fs::read_to_string(p) {
                Ok(text) => {
                    highest =
                        text.trim().parse().map_err(|_| TermError::Corrupt { path: p.clone(), text: text.clone() })?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(TermError::Read { path: p.clone(), source }),
            }
        }
        Ok(TermStore { path, highest })
    }

    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Records a term seen in the cluster; persists it when it is higher.
    /// Returns the highest term known afterwards.
    pub fn observe(&mut self, term: u64) -> Result<u64, TermError> {
        if term > self.highest {
            if let Some(p) = &self.path {
                write_atomically(p, term.to_string().as_bytes())
                    .map_err(|source| TermError::Write { path: p.clone(), source })?;
            }
            self.highest = term;
        }
        Ok(self.highest)
    }

    /// The term to campaign for, given the cluster's last issued term.
    pub fn next_after(&self, cluster_term: u64) -> u64 {
        cluster_term.max(self.highest) + 1
    }
}

/// Writes a small file so that a crash leaves either the old or the new
/// content (temporary file, fsync, rename).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_back_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.term");
        let mut t = TermStore::open(Some(path.clone())).unwrap();
        assert_eq!(t.highest(), 0);
        assert_eq!(t.next_after(0), 1);
        assert_eq!(t.observe(5).unwrap(), 5);
        assert_eq!(t.observe(3).unwrap(), 5, "a lower term is ignored");
        drop(t);

        // A restart reads it back; a cluster that forgot (etcd restored from
        // an old backup says 2) still gets a higher term than ever seen.
        let mut t = TermStore::open(Some(path.clone())).unwrap();
        assert_eq!(t.highest(), 5);
        assert_eq!(t.next_after(2), 6);
        assert_eq!(t.next_after(9), 10);
        t.observe(10).unwrap();
        let t = TermStore::open(Some(path)).unwrap();
        assert_eq!(t.highest(), 10);
    }

    #[test]
    fn every_new_primary_gets_a_higher_term() {
        let mut t = TermStore::open(None).unwrap();
        let mut cluster = 0;
        let mut last = 0;
        for _ in 0..50 {
            let next = t.next_after(cluster);
            assert!(next > last);
            t.observe(next).unwrap();
            cluster = next;
            last = next;
        }
        assert_eq!(last, 50);
    }

    #[test]
    fn corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.term");
        std::fs::write(&path, "seven").unwrap();
        assert!(matches!(TermStore::open(Some(path)), Err(TermError::Corrupt { .. })));
    }
}
