//! Memory of catch-ups from far back (not a timed test): run with
//! `cargo bench -p turnstile-server --bench catchup`.
//!
//! A store with R finished runs (each its own session: a user message, an answer, a session
//! row and a RunComplete) is made once. Then, in a fresh process each, a real server over it
//! takes C concurrent event streams that resume from `Last-Event-ID: 0-0` and read until each
//! has every RunComplete. Printed per variant: the process's peak resident memory (VmHWM)
//! before the catch-ups and after, and the time they took. The variants differ only in
//! `ServerConfig::catch_up_page`: the default (a page of 512 rows of whole revisions or 512
//! RunCompletes per store read) and, as the baseline measured in the same run, one page as
//! large as the store (every changed row at once, as before pages).
//!
//! Sizes: `TURNSTILE_CATCHUP_RUNS` (R, 20600), `TURNSTILE_CATCHUP_CLIENTS` (C, 20).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure is a panic

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile_core::{Submit, Usage};
use turnstile_host::{Answer, Host, HostConfig, ScriptedProvider, ToolSet};
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_wire::sse::Framer;

const TOKEN: &str = "catch-up-bench-token-0123456789";
/// Set in a child process: the store to serve and the page to read it in.
const CHILD: &str = "TURNSTILE_CATCHUP_CHILD";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let runs = env("TURNSTILE_CATCHUP_RUNS", 20_600).max(1);
    let clients = env("TURNSTILE_CATCHUP_CLIENTS", 20).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    if let Ok(spec) = std::env::var(CHILD) {
        let (store, page) = spec.split_once('|').expect("store|page");
        rt.block_on(child(Path::new(store), page.parse().expect("a page"), runs, clients));
        return;
    }
    let dir = tempfile::tempdir().expect("scratch dir");
    let store = dir.path().join("store.db");
    let started = Instant::now();
    rt.block_on(populate(&store, runs));
    println!(
        "# turnstile-server catch-up benchmark: {runs} finished runs, {clients} streams resuming \
         from 0-0 at once (store made in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    println!(
        "| page (rows or RunCompletes per read) | peak RSS before | peak RSS after | catch-up time |"
    );
    println!("|---|---|---|---|");
    for (label, page) in [("512 (default)", 512), ("whole store (baseline, no pages)", usize::MAX)]
    {
        let out = std::process::Command::new(std::env::current_exe().expect("this benchmark"))
            .env(CHILD, format!("{}|{page}", store.display()))
            .env("TURNSTILE_CATCHUP_RUNS", runs.to_string())
            .env("TURNSTILE_CATCHUP_CLIENTS", clients.to_string())
            .output()
            .expect("the child process");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let line = String::from_utf8_lossy(&out.stdout);
        println!("| {label} | {} |", line.trim());
    }
}

/// Makes a store of `runs` finished runs, each its own session.
async fn populate(store: &Path, runs: usize) {
    let provider =
        ScriptedProvider::new(|_, _| Answer::streamed("a short answer", 1, 0, Usage::default()));
    let host = Host::open(HostConfig::new(store), Arc::new(provider), ToolSet::new())
        .await
        .expect("open the host");
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..16 {
        let host = host.clone();
        tasks.spawn(async move {
            for i in (chunk..runs).step_by(16) {
                let s = Submit::new(format!("s{i}"), "hello").with_run_id(format!("r{i}"));
                host.submit(s).await.expect("accepted");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    for i in 0..runs {
        host.wait(&turnstile_core::RunId::new(format!("r{i}"))).await.expect("finished");
    }
    host.shutdown().await.expect("shutdown");
}

/// The process's peak resident memory, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// One variant: a server over the store, `clients` streams catching up from 0-0 at once.
async fn child(store: &Path, page: usize, runs: usize, clients: usize) {
    let provider = ScriptedProvider::new(|_, _| Answer::streamed("x", 1, 0, Usage::default()));
    let host = Host::open(HostConfig::new(store), Arc::new(provider), ToolSet::new())
        .await
        .expect("open the host");
    let mut config = ServerConfig::new(Token::new(TOKEN).expect("a token"));
    config.catch_up_page = page;
    let server = Server::start(host.clone(), Asks::new(), config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let http = reqwest::Client::new();
    // Warm: one request through the whole stack.
    let r = http.get(format!("{base}/v1/health")).bearer_auth(TOKEN).send().await.expect("up");
    assert_eq!(r.status(), 200);
    let before = peak_mib();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (http, base) = (http.clone(), base.clone());
        tasks.spawn(async move {
            let mut resp = http
                .get(format!("{base}/v1/events"))
                .bearer_auth(TOKEN)
                .header("Last-Event-ID", "0-0")
                .send()
                .await
                .expect("a stream");
            assert_eq!(resp.status(), 200);
            let (mut framer, mut frames, mut seen) = (Framer::new(), Vec::new(), 0);
            while seen < runs {
                let chunk = tokio::time::timeout(Duration::from_secs(120), resp.chunk())
                    .await
                    .expect("events within 120 s")
                    .expect("the stream")
                    .expect("not ended");
                framer.feed(&chunk, &mut frames).expect("SSE");
                seen += frames.drain(..).filter(|f| f.event == "run_complete").count();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a client");
    }
    let took = started.elapsed().as_secs_f64();
    println!("{before:.0} MiB | {:.0} MiB | {took:.1} s", peak_mib());
    let _ = host.shutdown().await;
}
