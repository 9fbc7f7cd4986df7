//! Loopback TCP proxies the chaos suite puts on every directed link
//! (node i → node j, router → node j). Each proxy forwards bytes both ways and
//! can, per direction, blackhole (hold every byte until healed, as a partitioned
//! TCP connection does) or delay (each chunk is written `delay` after it was
//! read, order kept); it can also refuse new connections and reset existing ones.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What one direction of a link does with bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirState {
    /// Hold every byte (nothing is delivered) until unblocked.
    pub blocked: bool,
    /// Added one-way latency.
    pub delay: Duration,
}

/// The whole state of one proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkState {
    /// Client → server bytes (from the dialing side to the target).
    pub up: DirState,
    /// Server → client bytes.
    pub down: DirState,
    /// Close new connections at once.
    pub refuse: bool,
    /// Bumped to close every existing connection.
    pub reset_epoch: u64,
    /// Set when the proxy shuts down.
    pub closed: bool,
}

/// Byte and connection counters of a proxy.
#[derive(Default, Debug)]
pub struct ProxyStats {
    pub up_bytes: AtomicU64,
    pub down_bytes: AtomicU64,
    pub connections: AtomicU64,
}

/// A running proxy: listens on `listen`, forwards to `target`.
pub struct Proxy {
    pub listen: SocketAddr,
    pub target: SocketAddr,
    pub stats: Arc<ProxyStats>,
    ctl: watch::Sender<LinkState>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Binds a free loopback port and starts forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding a proxy port")?;
        let listen = listener.local_addr()?;
        let (ctl, _) = watch::channel(LinkState::default());
        let stats = Arc::new(ProxyStats::default());
        let accept = tokio::spawn(accept_loop(listener, target, ctl.subscribe(), stats.clone()));
        Ok(Proxy { listen, target, stats, ctl, accept })
    }

    /// The current state.
    pub fn state(&self) -> LinkState {
        *self.ctl.borrow()
    }

    /// Changes the state (wakes every connection).
    pub fn update(&self, f: impl FnOnce(&mut LinkState)) {
        self.ctl.send_modify(f);
    }

    /// Closes every existing connection.
    pub fn reset(&self) {
        self.update(|s| s.reset_epoch += 1);
    }

    /// Back to plain forwarding (connections are kept).
    pub fn heal(&self) {
        self.update(|s| {
            s.up = DirState::default();
            s.down = DirState::default();
            s.refuse = false;
        });
    }

    /// Bytes delivered so far, both directions.
    pub fn bytes(&self) -> (u64, u64) {
        (self.stats.up_bytes.load(Ordering::Relaxed), self.stats.down_bytes.load(Ordering::Relaxed))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.ctl.send_modify(|s| s.closed = true);
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, ctl: watch::Receiver<LinkState>, stats: Arc<ProxyStats>) {
    loop {
        let Ok((client, _)) = listener.accept().await else { continue };
        let state = *ctl.borrow();
        if state.closed {
            return;
        }
        if state.refuse {
            drop(client);
            continue;
        }
        stats.connections.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(connection(client, target, ctl.clone(), stats.clone()));
    }
}

/// Waits until the connection must end (reset or shutdown).
async fn ended(mut ctl: watch::Receiver<LinkState>, epoch: u64) {
    loop {
        {
            let s = ctl.borrow_and_update();
            if s.closed || s.reset_epoch != epoch {
                return;
            }
        }
        if ctl.changed().await.is_err() {
            return;
        }
    }
}

async fn connection(client: TcpStream, target: SocketAddr, ctl: watch::Receiver<LinkState>, stats: Arc<ProxyStats>) {
    let epoch = ctl.borrow().reset_epoch;
    let Ok(server) = TcpStream::connect(target).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, ctl.clone(), true, stats.clone());
    let down = pump(sr, cw, ctl.clone(), false, stats);
    // Either direction ending (EOF, error) or a reset closes the whole connection.
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = ended(ctl, epoch) => {}
    }
}

/// Forwards one direction: a reader stamps chunks, a writer delivers each one
/// no earlier than `stamp + delay` and only while the direction is not blocked.
async fn pump<R, W>(mut r: R, mut w: W, ctl: watch::Receiver<LinkState>, up: bool, stats: Arc<ProxyStats>)
where
    R: AsyncReadExt + Unpin + Send + 'static,
    W: AsyncWriteExt + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(64);
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        let mut ctl = ctl;
        while let Some((stamp, chunk)) = rx.recv().await {
            let delay = loop {
                let dir = {
                    let s = ctl.borrow_and_update();
                    if up { s.up } else { s.down }
                };
                if !dir.blocked {
                    break dir.delay;
                }
                if ctl.changed().await.is_err() {
                    return;
                }
            };
            tokio::time::sleep_until(stamp + delay).await;
            if w.write_all(&chunk).await.is_err() {
                return;
            }
            let counter = if up { &stats.up_bytes } else { &stats.down_bytes };
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        let _ = w.shutdown().await;
    };
    // The reader ending (EOF) lets the writer flush what is queued, then end.
    let (_, _) = tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    async fn roundtrip(s: &mut TcpStream, msg: &[u8], within: Duration) -> Option<Vec<u8>> {
        s.write_all(msg).await.ok()?;
        let mut buf = vec![0u8; msg.len()];
        tokio::time::timeout(within, s.read_exact(&mut buf)).await.ok()?.ok()?;
        Some(buf)
    }

    #[tokio::test]
    async fn forwards_blackholes_delays_and_resets() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.listen).await.unwrap();
        assert_eq!(roundtrip(&mut s, b"ping", Duration::from_secs(5)).await.as_deref(), Some(&b"ping"[..]));

        // One-way blackhole: nothing comes back while blocked, everything after healing.
        proxy.update(|st| st.down.blocked = true);
        assert_eq!(roundtrip(&mut s, b"held", Duration::from_millis(300)).await, None);
        proxy.heal();
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"held");

        // Delay: a round trip takes at least the added latency.
        proxy.update(|st| st.up.delay = Duration::from_millis(200));
        let t = std::time::Instant::now();
        assert!(roundtrip(&mut s, b"slow", Duration::from_secs(5)).await.is_some());
        assert!(t.elapsed() >= Duration::from_millis(200));
        proxy.heal();

        // Reset closes the connection; refuse closes new ones.
        proxy.reset();
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0);
        proxy.update(|st| st.refuse = true);
        let mut s2 = TcpStream::connect(proxy.listen).await.unwrap();
        assert_eq!(roundtrip(&mut s2, b"x", Duration::from_millis(500)).await, None);
        proxy.heal();
        let mut s3 = TcpStream::connect(proxy.listen).await.unwrap();
        assert!(roundtrip(&mut s3, b"ok", Duration::from_secs(5)).await.is_some());
    }
}
