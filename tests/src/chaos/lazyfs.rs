//! A power-loss filesystem, after LazyFS: a FUSE passthrough over a backing
//! directory that remembers, per file, what has not been `fsync`ed, and can
//! forget it all at once — a **power cut** — or fail writes like a full or
//! broken disk.
//!
//! Model (the same as LazyFS's default, and what a crash of an ext4 page cache
//! looks like to a program that syncs its files):
//! - File **contents** are durable only up to the last `fsync`/`fdatasync` of
//!   that file. Writes after it (appends, overwrites, truncations, fallocate)
//!   are lost at a power cut: the file goes back to its length and bytes at the
//!   last sync.
//! - **Names** (create, rename, link, unlink, mkdir) take effect at once and
//!   survive a cut, as on a journaled filesystem that commits metadata before a
//!   crash. A file created and never synced survives empty.
//! - Writes go to the backing file as they happen (reads are plain
//!   passthrough); before a write or truncation touches bytes that were
//!   durable, their old contents are saved in memory. A cut truncates each
//!   unsynced file to its durable length and writes the saved bytes back,
//!   newest first. Append-only files (RocksDB's WAL, SSTs, MANIFEST) save
//!   nothing: only their durable length is remembered.
//!
//! Files are opened with `FOPEN_DIRECT_IO` and attributes are not cached, so
//! the kernel holds no page of a file the cut rolled back.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use fuser::{
    AccessFlags, BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

/// No attribute or entry caching in the kernel: a cut changes sizes underneath.
const TTL: Duration = Duration::ZERO;

/// A disk fault the filesystem can play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// Every write, create, mkdir and fallocate fails with `ENOSPC`.
    Full,
    /// Every write and fsync fails with `EIO`.
    Broken,
    /// Every fsync takes [`SLOW_SYNC`] before it makes anything durable
    /// (writes go on meanwhile): a slow disk, whose unsynced tail is long.
    SlowSync,
}

/// How long an fsync takes on a [`DiskFault::SlowSync`] disk.
pub const SLOW_SYNC: Duration = Duration::from_millis(40);

/// What a power cut threw away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files that had unsynced changes.
    pub files: u64,
    /// Bytes past the durable length, plus durable bytes restored.
    pub bytes: u64,
}

/// Counters since the mount.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub writes: u64,
    pub syncs: u64,
    pub faults_returned: u64,
}

/// Unsynced state of one file (keyed by backing inode).
struct Dirty {
    durable_len: u64,
    /// (offset, bytes as they were at the last sync), oldest first.
    undo: Vec<(u64, Vec<u8>)>,
}

struct Inner {
    backing: PathBuf,
    root_ino: u64,
    /// FUSE inode → backing paths (several after `link`).
    paths: HashMap<u64, Vec<PathBuf>>,
    handles: HashMap<u64, (u64, Arc<File>)>,
    next_fh: u64,
    dirty: HashMap<u64, Dirty>,
    fault: Option<DiskFault>,
    counters: Counters,
    /// Power cuts so far: a slow fsync that a cut overtook makes nothing durable.
    cuts: u64,
}

impl Inner {
    /// FUSE inode for a backing inode (the root is 1; a backing inode 1 takes the root's number).
    fn fuse_ino(&self, backing_ino: u64) -> u64 {
        if backing_ino == self.root_ino {
            1
        } else if backing_ino == 1 {
            self.root_ino
        } else {
            backing_ino
        }
    }

    fn path(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.paths.get(&ino).and_then(|ps| ps.iter().find(|p| p.symlink_metadata().is_ok()).or(ps.first())).cloned().ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent.0)?.join(name))
    }

    fn register(&mut self, path: &Path, md: &Metadata) -> u64 {
        let ino = self.fuse_ino(md.ino());
        let paths = self.paths.entry(ino).or_default();
        // The backing filesystem reuses the numbers of removed inodes: forget
        // names that now lead elsewhere (a removed directory's name that was
        // made again would otherwise resolve this inode to that directory).
        paths.retain(|p| p.symlink_metadata().is_ok_and(|m| m.ino() == md.ino()));
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_path_buf());
        }
        ino
    }

    fn attr(&self, md: &Metadata) -> FileAttr {
        let time = |t: std::io::Result<SystemTime>| t.unwrap_or(UNIX_EPOCH);
        FileAttr {
            ino: INodeNo(self.fuse_ino(md.ino())),
            size: md.len(),
            blocks: md.blocks(),
            atime: time(md.accessed()),
            mtime: time(md.modified()),
            ctime: UNIX_EPOCH + Duration::from_secs(md.ctime().max(0) as u64),
            crtime: UNIX_EPOCH,
            kind: FileType::from_std(md.file_type()).unwrap_or(FileType::RegularFile),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: 4096,
            flags: 0,
        }
    }

    fn fail(&mut self, on: &[DiskFault]) -> Result<(), Errno> {
        match self.fault {
            Some(f) if on.contains(&f) => {
                self.counters.faults_returned += 1;
                Err(match f {
                    DiskFault::Full => Errno::ENOSPC,
                    DiskFault::Broken | DiskFault::SlowSync => Errno::EIO,
                })
            }
            _ => Ok(()),
        }
    }

    /// Saves the durable bytes of `[offset, offset + len)` before they change.
    /// `size_now` is the file's current length (its durable length if it was clean).
    fn before_change(&mut self, ino: u64, file: &File, size_now: u64, offset: u64, len: u64) -> Result<(), Errno> {
        let d = self.dirty.entry(ino).or_insert(Dirty { durable_len: size_now, undo: Vec::new() });
        let end = (offset.saturating_add(len)).min(d.durable_len);
        if offset < end {
            let mut old = vec![0u8; (end - offset) as usize];
            let n = read_full_at(file, &mut old, offset)?;
            old.truncate(n);
            d.undo.push((offset, old));
        }
        Ok(())
    }

    fn forget_file_if_gone(&mut self, ino: u64, nlink_before: u64) {
        if nlink_before <= 1 {
            self.dirty.remove(&ino);
        }
    }
}

fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

/// The filesystem served to the kernel.
struct LazyFsImpl {
    inner: Arc<Mutex<Inner>>,
}

impl LazyFsImpl {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

macro_rules! tri {
    ($reply:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(err) => {
                $reply.error(Errno::from(err));
                return;
            }
        }
    };
}

fn io<T>(r: std::io::Result<T>) -> Result<T, Errno> {
    r.map_err(Errno::from)
}

impl Filesystem for LazyFsImpl {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        let path = tri!(reply, s.child(parent, name));
        let md = tri!(reply, io(path.symlink_metadata()));
        s.register(&path, &md);
        reply.entry(&TTL, &s.attr(&md), Generation(0));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.lock();
        let md = match fh.and_then(|fh| s.handles.get(&fh.0)) {
            Some((_, f)) => tri!(reply, io(f.metadata())),
            None => tri!(reply, io(tri!(reply, s.path(ino.0)).symlink_metadata())),
        };
        reply.attr(&TTL, &s.attr(&md));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.lock();
        let path = tri!(reply, s.path(ino.0));
        if let Some(size) = size {
            tri!(reply, s.fail(&[DiskFault::Broken]));
            let file = match fh.and_then(|fh| s.handles.get(&fh.0)) {
                Some((_, f)) => f.clone(),
                None => Arc::new(tri!(reply, io(OpenOptions::new().read(true).write(true).open(&path)))),
            };
            let now = tri!(reply, io(file.metadata())).len();
            if size < now {
                tri!(reply, s.before_change(ino.0, &file, now, size, now - size));
            } else {
                tri!(reply, s.before_change(ino.0, &file, now, now, 0));
            }
            tri!(reply, io(file.set_len(size)));
        }
        if let Some(mode) = mode {
            tri!(reply, io(std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))));
        }
        let md = tri!(reply, io(path.symlink_metadata()));
        reply.attr(&TTL, &s.attr(&md));
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Full]));
        let path = tri!(reply, s.child(parent, name));
        tri!(reply, io(std::fs::create_dir(&path)));
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !umask & 0o7777));
        let md = tri!(reply, io(path.symlink_metadata()));
        s.register(&path, &md);
        reply.entry(&TTL, &s.attr(&md), Generation(0));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let path = tri!(reply, s.child(parent, name));
        let md = tri!(reply, io(path.symlink_metadata()));
        tri!(reply, io(std::fs::remove_file(&path)));
        let ino = s.fuse_ino(md.ino());
        if let Some(ps) = s.paths.get_mut(&ino) {
            ps.retain(|p| p != &path);
        }
        s.forget_file_if_gone(ino, md.nlink());
        reply.ok();
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let path = tri!(reply, s.child(parent, name));
        let md = tri!(reply, io(path.symlink_metadata()));
        tri!(reply, io(std::fs::remove_dir(&path)));
        let ino = s.fuse_ino(md.ino());
        if let Some(ps) = s.paths.get_mut(&ino) {
            ps.retain(|p| p != &path);
        }
        reply.ok();
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            reply.error(Errno::EINVAL);
            return;
        }
        let mut s = self.lock();
        let from = tri!(reply, s.child(parent, name));
        let to = tri!(reply, s.child(newparent, newname));
        let replaced = to.symlink_metadata().ok();
        tri!(reply, io(std::fs::rename(&from, &to)));
        if let Some(md) = replaced {
            let ino = s.fuse_ino(md.ino());
            if let Some(ps) = s.paths.get_mut(&ino) {
                ps.retain(|p| p != &to);
            }
            if md.is_file() {
                s.forget_file_if_gone(ino, md.nlink());
            }
        }
        for ps in s.paths.values_mut() {
            for p in ps.iter_mut() {
                if let Ok(rest) = p.strip_prefix(&from) {
                    *p = if rest.as_os_str().is_empty() { to.clone() } else { to.join(rest) };
                }
            }
        }
        reply.ok();
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Full]));
        let from = tri!(reply, s.path(ino.0));
        let to = tri!(reply, s.child(newparent, newname));
        tri!(reply, io(std::fs::hard_link(&from, &to)));
        let md = tri!(reply, io(to.symlink_metadata()));
        s.register(&to, &md);
        reply.entry(&TTL, &s.attr(&md), Generation(0));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        let path = tri!(reply, s.path(ino.0));
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let file = tri!(reply, io(OpenOptions::new().read(true).write(write).open(&path)));
        if write && flags.0 & libc::O_TRUNC != 0 {
            tri!(reply, s.fail(&[DiskFault::Broken]));
            let now = tri!(reply, io(file.metadata())).len();
            tri!(reply, s.before_change(ino.0, &file, now, 0, now));
            tri!(reply, io(file.set_len(0)));
        }
        let fh = s.next_fh;
        s.next_fh += 1;
        s.handles.insert(fh, (ino.0, Arc::new(file)));
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn create(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Full]));
        let path = tri!(reply, s.child(parent, name));
        let existed = path.symlink_metadata().is_ok();
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true).mode(mode & !umask & 0o7777);
        if flags & libc::O_EXCL != 0 {
            opts.create_new(true);
        }
        let file = tri!(reply, io(opts.open(&path)));
        let md = tri!(reply, io(file.metadata()));
        let ino = s.register(&path, &md);
        if !existed {
            // The name is durable at once; the contents from the first sync on.
            s.dirty.insert(ino, Dirty { durable_len: 0, undo: Vec::new() });
        } else if flags & libc::O_TRUNC != 0 {
            tri!(reply, s.before_change(ino, &file, md.len(), 0, md.len()));
            tri!(reply, io(file.set_len(0)));
        }
        let md = tri!(reply, io(file.metadata()));
        let fh = s.next_fh;
        s.next_fh += 1;
        s.handles.insert(fh, (ino, Arc::new(file)));
        reply.created(&TTL, &s.attr(&md), Generation(0), FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let file = match self.lock().handles.get(&fh.0) {
            Some((_, f)) => f.clone(),
            None => return reply.error(Errno::EBADF),
        };
        let mut buf = vec![0u8; size as usize];
        let n = tri!(reply, read_full_at(&file, &mut buf, offset));
        reply.data(&buf[..n]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Full, DiskFault::Broken]));
        let file = match s.handles.get(&fh.0) {
            Some((_, f)) => f.clone(),
            None => return reply.error(Errno::EBADF),
        };
        let now = tri!(reply, io(file.metadata())).len();
        tri!(reply, s.before_change(ino.0, &file, now, offset, data.len() as u64));
        tri!(reply, io(file.write_all_at(data, offset)));
        s.counters.writes += 1;
        reply.written(data.len() as u32);
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().handles.remove(&fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Broken]));
        if s.fault == Some(DiskFault::SlowSync) {
            let cuts = s.cuts;
            drop(s);
            std::thread::sleep(SLOW_SYNC);
            s = self.lock();
            if s.cuts != cuts {
                reply.error(Errno::EIO);
                return;
            }
        }
        // The backing directory stands for the disk: what is in it now is what survives.
        s.dirty.remove(&ino.0);
        s.counters.syncs += 1;
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let s = self.lock();
        let path = tri!(reply, s.path(ino.0));
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> =
            vec![(ino.0, FileType::Directory, ".".into()), (ino.0, FileType::Directory, "..".into())];
        let mut children = Vec::new();
        for e in tri!(reply, io(std::fs::read_dir(&path))) {
            let e = tri!(reply, io(e));
            let kind = e.file_type().ok().and_then(FileType::from_std).unwrap_or(FileType::RegularFile);
            children.push((s.fuse_ino(std::os::unix::fs::DirEntryExt::ino(&e)), kind, e.file_name()));
        }
        children.sort_by(|a, b| a.2.cmp(&b.2));
        entries.extend(children);
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let backing = self.lock().backing.clone();
        let c = std::ffi::CString::new(backing.as_os_str().as_encoded_bytes()).unwrap_or_default();
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid NUL-terminated path and a zeroed out-struct.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return reply.error(Errno::EIO);
        }
        reply.statfs(
            st.f_blocks,
            st.f_bfree,
            st.f_bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize as u32,
            st.f_namemax as u32,
            st.f_frsize as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let mut s = self.lock();
        tri!(reply, s.fail(&[DiskFault::Full, DiskFault::Broken]));
        let file = match s.handles.get(&fh.0) {
            Some((_, f)) => f.clone(),
            None => return reply.error(Errno::EBADF),
        };
        let now = tri!(reply, io(file.metadata())).len();
        // fallocate only adds zeroes past the end or keeps the size; punching
        // holes (which would change durable bytes) is refused.
        if mode & !(libc::FALLOC_FL_KEEP_SIZE) != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        tri!(reply, s.before_change(ino.0, &file, now, now, 0));
        // SAFETY: a valid open descriptor.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t) };
        if rc != 0 {
            return reply.error(Errno::from(std::io::Error::last_os_error()));
        }
        reply.ok();
    }
}

/// A mounted power-loss filesystem. Unmounted on drop.
pub struct LazyFs {
    inner: Arc<Mutex<Inner>>,
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
}

impl LazyFs {
    /// Mounts a filesystem at `mountpoint` whose data lives in `backing`
    /// (both are created). Needs `/dev/fuse` and the right to mount (root).
    pub fn mount(backing: &Path, mountpoint: &Path) -> Result<LazyFs> {
        std::fs::create_dir_all(backing)?;
        std::fs::create_dir_all(mountpoint)?;
        let backing = backing.canonicalize()?;
        let root_md = backing.symlink_metadata()?;
        let mut paths = HashMap::new();
        paths.insert(1, vec![backing.clone()]);
        let inner = Arc::new(Mutex::new(Inner {
            backing,
            root_ino: root_md.ino(),
            paths,
            handles: HashMap::new(),
            next_fh: 1,
            dirty: HashMap::new(),
            fault: None,
            counters: Counters::default(),
            cuts: 0,
        }));
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("tessera-lazyfs".into()), MountOption::NoAtime];
        config.n_threads = Some(2);
        let session = fuser::spawn_mount(LazyFsImpl { inner: inner.clone() }, mountpoint, &config)
            .with_context(|| format!("mounting the power-loss filesystem at {}", mountpoint.display()))?;
        Ok(LazyFs { inner, session: Some(session), mountpoint: mountpoint.to_path_buf() })
    }

    /// `Ok(())` when a FUSE filesystem can be mounted here; otherwise why not.
    pub fn probe(dir: &Path) -> Result<()> {
        anyhow::ensure!(Path::new("/dev/fuse").exists(), "/dev/fuse does not exist");
        let fs = LazyFs::mount(&dir.join("probe.disk"), &dir.join("probe"))?;
        std::fs::write(dir.join("probe/file"), b"probe").context("writing through the probe mount")?;
        drop(fs);
        let _ = std::fs::remove_dir_all(dir.join("probe.disk"));
        let _ = std::fs::remove_dir(dir.join("probe"));
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the filesystem is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Loses every unsynced change, as a power cut would. Call it only while
    /// no process uses the filesystem (after SIGKILLing it).
    pub fn power_cut(&self) -> Result<CutReport> {
        let mut s = self.lock();
        s.cuts += 1;
        let dirty: Vec<(u64, Dirty)> = s.dirty.drain().collect();
        let mut report = CutReport::default();
        for (ino, d) in dirty {
            let Ok(path) = s.path(ino) else { continue };
            let Ok(file) = OpenOptions::new().write(true).open(&path) else { continue };
            let len = file.metadata()?.len();
            report.files += 1;
            report.bytes += len.saturating_sub(d.durable_len);
            file.set_len(d.durable_len)?;
            for (offset, bytes) in d.undo.iter().rev() {
                report.bytes += bytes.len() as u64;
                file.write_all_at(bytes, *offset)?;
            }
        }
        Ok(report)
    }

    /// Starts (or with `None` ends) a disk fault.
    pub fn set_fault(&self, fault: Option<DiskFault>) {
        self.lock().fault = fault;
    }

    /// Counters since the mount.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}

/// Set to `1` (as CI does) to make a missing FUSE fail the power-loss and
/// disk-fault scenarios instead of skipping them.
pub const REQUIRE_FUSE_ENV: &str = "TESSERA_REQUIRE_FUSE";

/// Whether [`REQUIRE_FUSE_ENV`] asks for FUSE.
pub fn fuse_required() -> bool {
    std::env::var(REQUIRE_FUSE_ENV).is_ok_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounted() -> Option<(tempfile::TempDir, LazyFs)> {
        let dir = tempfile::tempdir().unwrap();
        if let Err(e) = LazyFs::probe(dir.path()) {
            assert!(!fuse_required(), "{REQUIRE_FUSE_ENV}=1 but FUSE is not available here: {e:#}");
            eprintln!("SKIPPED: FUSE is not available here: {e:#}");
            return None;
        }
        let fs = LazyFs::mount(&dir.path().join("disk"), &dir.path().join("mnt")).unwrap();
        Some((dir, fs))
    }

    #[test]
    fn a_power_cut_loses_exactly_what_was_not_synced() {
        let Some((dir, fs)) = mounted() else { return };
        let mnt = dir.path().join("mnt");
        // A synced file, then an unsynced append and an unsynced overwrite.
        let mut f = File::create(mnt.join("wal")).unwrap();
        std::io::Write::write_all(&mut f, b"synced-").unwrap();
        f.sync_data().unwrap();
        std::io::Write::write_all(&mut f, b"lost").unwrap();
        f.write_all_at(b"SY", 0).unwrap();
        // A file created and never synced; a file renamed into place after its sync.
        std::fs::write(mnt.join("never-synced"), b"gone").unwrap();
        let mut t = File::create(mnt.join("CURRENT.tmp")).unwrap();
        std::io::Write::write_all(&mut t, b"MANIFEST-7").unwrap();
        t.sync_all().unwrap();
        std::fs::rename(mnt.join("CURRENT.tmp"), mnt.join("CURRENT")).unwrap();
        assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"SYnced-lost");
        drop((f, t));

        let cut = fs.power_cut().unwrap();
        assert_eq!(cut.files, 2, "{cut:?}");
        assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced-");
        assert_eq!(std::fs::read(mnt.join("never-synced")).unwrap(), b"");
        assert_eq!(std::fs::read(mnt.join("CURRENT")).unwrap(), b"MANIFEST-7");
        assert!(!mnt.join("CURRENT.tmp").exists());
        // Nothing is unsynced after a cut.
        assert_eq!(fs.power_cut().unwrap(), CutReport::default());
    }

    #[test]
    fn truncation_and_disk_faults() {
        let Some((dir, fs)) = mounted() else { return };
        let mnt = dir.path().join("mnt");
        let f = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(mnt.join("data")).unwrap();
        f.write_all_at(b"0123456789", 0).unwrap();
        f.sync_all().unwrap();
        f.set_len(4).unwrap();
        assert_eq!(std::fs::read(mnt.join("data")).unwrap(), b"0123");
        fs.power_cut().unwrap();
        assert_eq!(std::fs::read(mnt.join("data")).unwrap(), b"0123456789");

        fs.set_fault(Some(DiskFault::Full));
        let err = f.write_all_at(b"x", 10).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(File::create(mnt.join("new")).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        fs.set_fault(Some(DiskFault::Broken));
        assert_eq!(f.sync_all().unwrap_err().raw_os_error(), Some(libc::EIO));
        fs.set_fault(None);
        f.write_all_at(b"x", 10).unwrap();
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(mnt.join("data")).unwrap(), b"0123456789x");
        assert!(fs.counters().faults_returned >= 3);
    }
}
