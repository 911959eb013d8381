//! One prompt against a configured provider, through the reference host.
//!
//! ```text
//! cargo run -p turnstile-http --example one_prompt -- [MODEL] [PROMPT]
//! ```
//!
//! MODEL is `provider/model` (default: `TURNSTILE_MODEL`, the configuration's `model`, or
//! `anthropic/claude-sonnet-4`); the configuration is `TURNSTILE_CONFIG` or `turnstile.toml`
//! when it exists, over the built-in catalogue. Without the provider's key in the environment
//! the example says which variable to set and exits 0, so it runs anywhere (CI included).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use turnstile_core::{Outcome, RunId, Submit};
use turnstile_host::{Host, HostConfig, ToolSet};
use turnstile_http::{Config, HttpProvider, KeySource};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let model = args.next();
    let prompt = args.next().unwrap_or_else(|| "Say hello in one short sentence.".to_owned());
    let path = std::env::var_os("TURNSTILE_CONFIG").map(PathBuf::from).or_else(|| {
        let local = PathBuf::from("turnstile.toml");
        local.exists().then_some(local)
    });
    let config = match Config::load(path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let name = model.or(config.model.clone()).unwrap_or_else(|| "anthropic/claude-sonnet-4".into());
    let (provider, _) = match config.resolve(Some(&name)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let KeySource::Env(var) = &provider.key
        && std::env::var_os(var).is_none_or(|v| v.is_empty())
    {
        println!("skipping: set {var} to run one prompt against `{name}`");
        return ExitCode::SUCCESS;
    }
    let provider = match HttpProvider::new(&config, Some(&name)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("turnstile-one-prompt-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let result = async {
        let host =
            Host::open(HostConfig::new(dir.join("store.db")), Arc::new(provider), ToolSet::new())
                .await?;
        host.submit(Submit::new("one-prompt", prompt).with_run_id("one")).await?;
        let done = host.wait(&RunId::new("one")).await?;
        host.shutdown().await?;
        Ok::<_, Box<dyn std::error::Error>>(done)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(done) if done.outcome == Outcome::Completed => {
            println!("{}", done.text.unwrap_or_default());
            ExitCode::SUCCESS
        }
        Ok(done) => {
            let why = done.error.map(|e| format!("{}: {}", e.title, e.message)).unwrap_or_default();
            eprintln!("the run ended {:?}: {why}", done.outcome);
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
