//! What the end-to-end tests of `turnstile run` share besides the test kit (whose fake
//! provider on 127.0.0.1 answers them with Anthropic event streams, recorded ones or ones built
//! in the recorded streams' exact shape): a scratch project with a configuration pointing at
//! that provider, and the real binary.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[allow(unused_imports)] // used by some of the test files only
pub use turnstile_testkit::local::free_port;

/// The MCP test server binary, which `cargo test --workspace` builds beside `turnstile`.
pub fn mcp_test_server() -> PathBuf {
    built(
        "turnstile-mcp-test-server",
        "cargo build -p turnstile-mcp --bin turnstile-mcp-test-server",
    )
}

/// A workspace binary built beside `turnstile`.
pub fn built(name: &str, build: &str) -> PathBuf {
    let turnstile = PathBuf::from(env!("CARGO_BIN_EXE_turnstile"));
    turnstile_testkit::local::built(turnstile.parent().unwrap(), name, build)
}

/// A scratch project: a working directory with a configuration for the provider.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// The project's store is this PostgreSQL database (`TURNSTILE_STORE`), not its file.
    pub database: Option<turnstile_host::store::ScratchDatabase>,
}

impl Project {
    /// A project whose configuration uses `base_url`, plus `extra` TOML.
    pub fn new(base_url: &str, extra: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("turnstile.toml");
        std::fs::write(
            &config,
            format!(
                "model = \"test/claude\"\n{extra}\n\n[providers.test]\napi = \"anthropic-messages\"\n\
                 base_url = \"{base_url}\"\n\n[providers.test.models.claude]\n\
                 model = \"claude-sonnet-4-20250514\"\ncontext_window = 200000\n"
            ),
        )
        .unwrap();
        Project {
            dir,
            config,
            database: None,
        }
    }

    /// The same project with its store in a scratch PostgreSQL database of its own (the
    /// server `TURNSTILE_TEST_POSTGRES` names; without it, a panic saying how to start one).
    #[must_use]
    pub fn on_postgres(mut self) -> Project {
        let db = turnstile_host::store::ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
        self.database = Some(db);
        self
    }

    /// A reader of the project's store, wherever it is.
    pub fn reader(&self) -> turnstile_host::store::Reader {
        match &self.database {
            Some(db) => turnstile_host::store::Reader::open_at(
                &turnstile_host::store::Location::Postgres(db.url().to_owned()),
            )
            .unwrap(),
            None => turnstile_host::store::Reader::open(&self.store()).unwrap(),
        }
    }

    /// A project with this configuration file.
    pub fn with_config(text: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("turnstile.toml");
        std::fs::write(&config, text).unwrap();
        Project {
            dir,
            config,
            database: None,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn store(&self) -> PathBuf {
        self.path().join(".turnstile").join("store.db")
    }

    /// `turnstile ARGS` in the project, with nothing of the caller's environment that could
    /// change what it does.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_turnstile"));
        c.args(args)
            .current_dir(self.path())
            .env_remove("TURNSTILE_CONFIG")
            .env_remove("TURNSTILE_STORE")
            .env_remove("TURNSTILE_MODEL")
            .env_remove("RUST_LOG")
            .env("HOME", self.path())
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(db) = &self.database {
            c.env("TURNSTILE_STORE", db.url());
        }
        c
    }

    /// Runs `turnstile ARGS` to its end (60 s at most).
    pub async fn run(&self, args: &[&str]) -> Done {
        let child = self.command(args).spawn().unwrap();
        finish(child).await
    }

    /// `turnstile sessions` before any run.
    pub async fn sessions_empty(&self) -> Done {
        assert!(!self.store().exists());
        self.run(&["sessions"]).await
    }

    /// Starts `turnstile ARGS` without waiting.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().unwrap()
    }
}

/// How a process ended.
#[derive(Debug)]
pub struct Done {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for `child` (60 s at most: a test never hangs) off the async threads.
pub async fn finish(child: Child) -> Done {
    let pid = child.id();
    let mut waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out: Output = match tokio::time::timeout(Duration::from_secs(60), &mut waiting).await {
        Ok(r) => r.unwrap().unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
            // What it printed until then says where it stuck.
            let out = waiting.await.unwrap().unwrap();
            panic!(
                "`turnstile` did not end within 60 s\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    Done {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Waits (10 s at most) until `path` exists and holds a number.
pub async fn number_in(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(n) = text.trim().parse()
        {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True while a process of group `pgid` lives.
pub fn group_alive(pgid: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

/// Waits (10 s at most) for the group to be gone.
pub async fn group_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Sends `signal` to the process.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        signal,
    )
    .unwrap();
}

/// Every `tool_use` of the request's messages has its `tool_result` in the next message: what
/// the Anthropic API requires of a request (and what history repair guarantees, SPEC 4.12).
pub fn protocol_legal(body: &serde_json::Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        let Some(content) = m["content"].as_array() else {
            continue;
        };
        for block in content.iter().filter(|b| b["type"] == "tool_use") {
            let id = &block["id"];
            let answered = messages
                .get(i + 1)
                .and_then(|n| n["content"].as_array())
                .is_some_and(|c| {
                    c.iter()
                        .any(|b| b["type"] == "tool_result" && &b["tool_use_id"] == id)
                });
            if !answered {
                return Err(format!(
                    "tool_use {id} of message {i} has no tool_result after it"
                ));
            }
        }
    }
    Ok(())
}

/// The tool results of the request's last message, as (tool_use_id, text).
pub fn last_results(body: &serde_json::Value) -> Vec<(String, String)> {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    last["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    let text = match &b["content"] {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Array(parts) => {
                            parts.iter().filter_map(|p| p["text"].as_str()).collect()
                        }
                        other => other.to_string(),
                    };
                    (b["tool_use_id"].as_str().unwrap_or("").to_owned(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A `turnstile serve` of a project on 127.0.0.1, killed when dropped (a test that fails before
/// it stops the server leaves nothing running).
pub struct Served {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Served {
    /// Starts `turnstile serve --listen 127.0.0.1:PORT ARGS` with `TURNSTILE_SERVER_TOKEN` set
    /// to `token` (or unset) and the variables of `env`, and waits (20 s at most) until it
    /// answers its health route (any answer: a 401 without the token means it is up).
    pub async fn start(
        project: &Project,
        port: u16,
        args: &[&str],
        token: Option<&str>,
        env: &[(&str, &str)],
    ) -> Served {
        let listen = format!("127.0.0.1:{port}");
        let mut all = vec!["serve", "--listen", &listen];
        all.extend_from_slice(args);
        let mut command = project.command(&all);
        command.env_remove("TURNSTILE_SERVER_TOKEN");
        if let Some(t) = token {
            command.env("TURNSTILE_SERVER_TOKEN", t);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        let served = Served {
            child: Some(command.spawn().unwrap()),
            base: format!("http://{listen}"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let http = reqwest::Client::new();
        let health = format!("{}/v1/health", served.base);
        while http.get(&health).send().await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the server on {listen} did not come up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        served
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// True until it was killed or stopped.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, and the process reaped.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().unwrap();
        signal(child.id(), nix::sys::signal::Signal::SIGKILL);
        child.wait().unwrap();
    }

    /// Sends `signal` and waits for its end.
    pub async fn stop(mut self, signal: nix::sys::signal::Signal) -> Done {
        let child = self.child.take().unwrap();
        self::signal(child.id(), signal);
        finish(child).await
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
