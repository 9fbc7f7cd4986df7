//! HNSW benchmark: build time, insert rate, and QPS / recall@10 against brute
//! force for several `ef` values.
//!
//! ```text
//! cargo run -p tessera-vector --release --example bench -- --n 100000 --dim 128
//! ```
//! Options: `--n`, `--dim`, `--queries` (200), `--k` (10), `--m` (16),
//! `--ef-construction` (200), `--metric` (l2|cosine|dot), `--data`
//! (gaussian | uniform | lowrank: 16-d latent embedded in `dim`), `--seed` (1),
//! `--filter` (fraction of ids accepted, 0 = none).

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{Rng, gaussian_vectors, lowrank_vectors, recall, records, uniform_vectors};
use tessera_vector::{HnswIndex, HnswParams, Metric, brute_force};

struct Args {
    n: usize,
    dim: usize,
    queries: usize,
    k: usize,
    m: usize,
    ef_construction: usize,
    metric: Metric,
    data: String,
    seed: u64,
    filter: f64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        n: 10_000,
        dim: 64,
        queries: 200,
        k: 10,
        m: 16,
        ef_construction: 200,
        metric: Metric::L2,
        data: "gaussian".into(),
        seed: 1,
        filter: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--n" => a.n = num(&value)?,
            "--dim" => a.dim = num(&value)?,
            "--queries" => a.queries = num(&value)?,
            "--k" => a.k = num(&value)?,
            "--m" => a.m = num(&value)?,
            "--ef-construction" => a.ef_construction = num(&value)?,
            "--seed" => a.seed = num(&value)? as u64,
            "--metric" => a.metric = value.parse().map_err(|e| format!("{e}"))?,
            "--data" => match value.as_str() {
                "gaussian" | "uniform" | "lowrank" => a.data = value,
                _ => {
                    return Err(format!("--data: expected gaussian, uniform or lowrank, got {value}"));
                }
            },
            "--filter" => a.filter = value.parse().map_err(|e| format!("{flag}: {e}"))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rng = Rng::new(args.seed);
    let (data, queries) = match args.data.as_str() {
        "uniform" => (uniform_vectors(&mut rng, args.n, args.dim), uniform_vectors(&mut rng, args.queries, args.dim)),
        "lowrank" => lowrank_vectors(&mut rng, args.n, args.queries, args.dim, 16.min(args.dim)),
        _ => (gaussian_vectors(&mut rng, args.n, args.dim), gaussian_vectors(&mut rng, args.queries, args.dim)),
    };
    println!(
        "n={} dim={} metric={} data={} m={} ef_construction={} queries={} k={} filter={}",
        args.n, args.dim, args.metric, args.data, args.m, args.ef_construction, args.queries, args.k, args.filter
    );

    let params = HnswParams { m: args.m, ef_construction: args.ef_construction, seed: args.seed, ..Default::default() };
    let start = Instant::now();
    let mut index = match HnswIndex::new(args.dim, args.metric, params) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (id, v) in records(&data) {
        if let Err(e) = index.insert(id, v) {
            eprintln!("bench: insert {id}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let build = start.elapsed().as_secs_f64();
    println!("build: {build:.2} s, {:.0} inserts/s", args.n as f64 / build);

    // Accept a pseudo-random fraction of ids.
    let threshold = (args.filter * u64::MAX as f64) as u64;
    let accept = move |id: u64| {
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h ^ (h >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) < threshold
    };
    let filter: Option<&dyn Fn(u64) -> bool> = if args.filter > 0.0 { Some(&accept) } else { None };

    let start = Instant::now();
    let truth: Vec<_> = queries.iter().map(|q| brute_force(records(&data), q, args.k, args.metric, filter).unwrap_or_default()).collect();
    let brute = start.elapsed().as_secs_f64();
    println!("brute force: {:.1} QPS", args.queries as f64 / brute);

    println!("{:>6} {:>10} {:>10}", "ef", "QPS", "recall@k");
    for ef in [16, 32, 64, 128, 256] {
        let start = Instant::now();
        let mut results = Vec::with_capacity(queries.len());
        for q in &queries {
            results.push(index.search(q, args.k, Some(ef), filter).unwrap_or_default());
        }
        let secs = start.elapsed().as_secs_f64();
        let r: f64 = results.iter().zip(&truth).map(|(got, want)| recall(got, want)).sum::<f64>() / queries.len() as f64;
        println!("{ef:>6} {:>10.0} {r:>10.4}", args.queries as f64 / secs);
    }
    ExitCode::SUCCESS
}
