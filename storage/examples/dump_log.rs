//! Debug aid for chaos investigations: prints the Raft log of one group in a
//! node's data directory, one entry per line, optionally only entries whose
//! text contains a needle. Run it on a copy of the directory (opening a store
//! may write to it):
//!
//! `cargo run -p tessera-storage --example dump_log -- COPY/rocksdb GROUP [NEEDLE]`
use openraft::storage::{RaftLogReader, RaftLogStorage};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(group)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: dump_log DB_DIR GROUP [NEEDLE]");
        std::process::exit(2);
    };
    let needle = args.get(3).map(String::as_str).unwrap_or("");
    let store = tessera_storage::Store::open(dir)?;
    let mut log = store.log_store(group.parse()?);
    println!("log state: {:?}", log.get_log_state().await?);
    let mut reader = log.get_log_reader().await;
    for entry in reader.try_get_log_entries(0..u64::MAX).await? {
        let text = match &entry.payload {
            openraft::EntryPayload::Normal(cmd) => format!("{cmd:?}"),
            other => format!("{other:?}"),
        };
        if text.contains(needle) {
            println!("{} {text}", entry.log_id);
        }
    }
    Ok(())
}
