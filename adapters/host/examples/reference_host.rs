//! A whole program on the reference host: submit prompts, wait for their RunCompletes, watch
//! the live updates, follow the lossless completion stream, stop without a shutdown (as a
//! crash would), restart on the same store, and ask about runs of the earlier process.
//!
//! `cargo run -p turnstile-host --example reference_host` (CI runs it). Every claim it
//! prints is also asserted, so a broken host makes it fail.

use std::sync::Arc;

use turnstile_host::turnstile_core::{Outcome, RunId, SessionId, Submit};
use turnstile_host::{
    Answer, Cursor, EchoTool, Event, Host, HostConfig, OpenError, ScriptedProvider, StoreError,
    ToolSet, Update, Usage,
};

/// Streams "echo: <prompt>" in three deltas; a prompt that starts with "hang" never answers.
fn provider() -> ScriptedProvider {
    ScriptedProvider::new(|request, _| {
        let prompt = request.last_user_text().unwrap_or_default().to_owned();
        if prompt.starts_with("hang") {
            return Answer::hang();
        }
        let usage = Usage { input_tokens: 12, output_tokens: 4, ..Usage::default() };
        Answer::streamed(&format!("echo: {prompt}"), 3, 5, usage)
    })
}

fn tools() -> ToolSet {
    ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 })
}

/// Opens the store again. The dropped host releases it once its tasks have stopped, a moment
/// later (a new process after a real crash finds it free at once: the OS drops the lock).
async fn reopen(config: HostConfig) -> Result<Host, OpenError> {
    for _ in 0..500 {
        match Host::open(config.clone(), Arc::new(provider()), tools()).await {
            Err(OpenError::Store(StoreError::InUse)) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
    Host::open(config, Arc::new(provider()), tools()).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let config = HostConfig::new(dir.path().join("agent.db"));
    let host = Host::open(config.clone(), Arc::new(provider()), tools()).await?;

    // Live updates: lossy, never slowing the engine; a slow subscriber hears `Lagged`.
    let mut updates = host.subscribe();
    let watcher = tokio::spawn(async move {
        let (mut finished, mut lagged) = (0, 0);
        while let Some(event) = updates.recv().await {
            match event {
                Event::Update(Update::TurnFinished { .. }) => finished += 1,
                Event::Lagged { skipped } => lagged += skipped,
                Event::Update(_) => {}
            }
        }
        (finished, lagged)
    });

    // Three prompts: two runs in one session (the second waits for the first, in order) and
    // one in another session. Each answer comes after its ledger row is durable.
    let first = host.submit(Submit::new("s1", "hello").with_run_id("r1")).await?;
    host.submit(Submit::new("s1", "and then?").with_run_id("r2")).await?;
    host.submit(Submit::new("s2", "elsewhere").with_run_id("r3")).await?;
    println!("accepted r1 as sequence {}", first.seq);

    for run in ["r1", "r2", "r3"] {
        let done = host.wait(&RunId::new(run)).await?;
        println!("{run}: {:?} {:?}", done.outcome, done.text.as_deref().unwrap_or(""));
        assert_eq!(done.outcome, Outcome::Completed);
    }

    // The completion stream from the start of the ledger: every outcome once, in the order the
    // ledger recorded them (r3 ran beside r1 in another session and may finish first).
    let mut stream = host.completions(Cursor(0));
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let Some((cursor, record)) = stream.next().await? else { break };
        println!("completion at cursor {}: sequence {} {:?}", cursor.0, record.seq, record.outcome);
        seen.push((cursor, record.seq));
    }
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "cursors increase: {seen:?}");
    let mut seqs: Vec<_> = seen.iter().map(|(_, s)| s.0).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, [1, 2, 3], "each outcome once");

    // A run that is still running when the process goes away without a shutdown.
    host.submit(Submit::new("s3", "hang on").with_run_id("r4")).await?;
    host.flush().await?;
    drop(host); // every handle dropped: the engine stops and releases the store
    let (finished, lagged) = watcher.await?;
    println!("live updates: {finished} turns finished, {lagged} skipped");

    // The next host on the same store: recovery ends r4 `interrupted`, with its RunComplete,
    // and RunIds of the earlier host are still answered.
    let host = reopen(config).await?;
    for (cursor, record) in host.recovered() {
        println!("recovered at cursor {}: {:?} {:?}", cursor.0, record.run_id, record.outcome);
    }
    let r4 = host.wait(&RunId::new("r4")).await?;
    assert_eq!(r4.outcome, Outcome::Interrupted);
    let r1 = host.wait(&RunId::new("r1")).await?;
    println!("after the restart, r1 is still {:?} {:?}", r1.outcome, r1.text.unwrap_or_default());
    let again = host.submit(Submit::new("s1", "hello").with_run_id("r1")).await?;
    assert_eq!(again.seq, first.seq, "a finished run is answered, never run again");
    let next = host.submit(Submit::new("s1", "one more").with_run_id("r5")).await?;
    println!("sequences continue across the restart: r5 is sequence {}", next.seq);
    assert!(next.seq.0 > 4);
    host.wait(&RunId::new("r5")).await?;
    assert!(!host.is_busy(&SessionId::new("s1")).await?);
    host.shutdown().await?;
    println!("shut down cleanly");
    Ok(())
}
