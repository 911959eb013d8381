//! Permission asks across several servers over one store (SPEC 11): an ask of the server that
//! owns the session is listed and streamed by every server, answered on another one (the
//! store decides once), and withdrawn everywhere by a cancel sent to yet another; a client that
//! moves to another server with `Last-Event-ID` hears of the pending ask first. Real servers
//! on 127.0.0.1 over real member hosts, the real gate and built-in tools; on SQLite members in
//! one process, and on PostgreSQL (ignored without a server).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnstile_host::store::{Location, ScratchDatabase, StoreConfig};
use turnstile_host::{Answer, Host, HostConfig, MemberConfig, ModelRequest, RequestMessage};
use turnstile_host::{ScriptedProvider, Usage};
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_testkit::events::Events;
use turnstile_tools::{Gate, Permissions, PermissionsFile};

const TOKEN: &str = "test-token-0123456789";

macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(false).await }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
                async fn $name() { super::$name(true).await }
            )*
        }
    };
}

both_stores!(an_ask_is_listed_streamed_answered_and_withdrawn_on_every_server);

/// The model calls the tool its prompt names (`<tool> <JSON input>`), then answers "done".
fn provider() -> ScriptedProvider {
    ScriptedProvider::new(|req: &ModelRequest, _| {
        // The turn's prompt is the last user message; once its call has a result, "done".
        let last = req.messages.iter().rposition(|m| matches!(m, RequestMessage::User { .. }));
        let last = last.unwrap();
        if req.messages[last..].iter().any(|m| matches!(m, RequestMessage::ToolResults(_))) {
            return Answer::streamed("done", 1, 0, Usage::default());
        }
        let RequestMessage::User { text: prompt, .. } = &req.messages[last] else { unreachable!() };
        let (tool, input) = prompt.split_once(' ').unwrap();
        Answer::tool_call("call-1", tool, input)
    })
}

/// One server of the store, every tool call asking.
struct Member {
    base: String,
    http: reqwest::Client,
    _task: tokio::task::JoinHandle<()>,
    host: Host,
}

impl Member {
    async fn start(name: &str, store: &StoreConfig, dir: &std::path::Path) -> Member {
        let asks = Asks::new();
        let rules = PermissionsFile { ask: vec!["*".into()], ..PermissionsFile::default() };
        let gate =
            Gate::new(Permissions::new(&rules).unwrap(), Vec::new(), Arc::new(asks.clone()), dir);
        let tools =
            Arc::new(gate).wrap(turnstile_tools::builtins(dir, None).unwrap()).without_agent();
        let mut config = HostConfig::with_store(store.clone());
        let mut member = MemberConfig::new(name);
        member.lease = Duration::from_secs(3);
        member.margin = Duration::from_secs(1);
        member.poll = Duration::from_millis(100);
        config.member = Some(member);
        let host = Host::open(config, Arc::new(provider()), tools).await.expect("open");
        asks.share(&host);
        let mut server_config = ServerConfig::new(Token::new(TOKEN).unwrap());
        server_config.heartbeat = Duration::from_millis(200);
        let server = Server::start(host.clone(), asks, server_config).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            server.serve(listener, std::future::pending()).await.unwrap();
        });
        Member { base, http: reqwest::Client::new(), _task: task, host }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(format!("{}{path}", self.base)).bearer_auth(TOKEN).json(&body);
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.base)).bearer_auth(TOKEN).send().await;
        let r = r.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn outcome(&self, run: &str) -> String {
        let (status, body) = self.get(&format!("/v1/runs/{run}/wait?timeout_ms=20000")).await;
        assert_eq!((status, &body["finished"]), (200, &json!(true)), "{run}: {body}");
        body["run_complete"]["outcome"].as_str().unwrap().to_owned()
    }
}

async fn an_ask_is_listed_streamed_answered_and_withdrawn_on_every_server(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let database = postgres.then(|| ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}")));
    let store = match &database {
        Some(db) => StoreConfig::at(Location::Postgres(db.url().to_owned())),
        None => StoreConfig::new(dir.path().join("store.db")),
    };
    let a = Member::start("a", &store, dir.path()).await;
    let b = Member::start("b", &store, dir.path()).await;
    let mut on_b = Events::connect(&b.base, TOKEN, None).await;
    let mut moving = Events::connect(&a.base, TOKEN, None).await;
    // A prompt on `a`: `a` owns the session, and its call asks.
    let touch = r#"bash {"command":"touch made-by-bash"}"#;
    let (status, _) =
        a.post("/v1/sessions/s/prompts", json!({"prompt": touch, "run_id": "r1"})).await;
    assert_eq!(status, 202);
    let opened = on_b.next_event("ask").await;
    let id = opened["id"].as_str().unwrap().to_owned();
    assert_eq!((opened["tool"].as_str(), opened["session"].as_str()), (Some("bash"), Some("s")));
    let (_, listed) = b.get("/v1/asks").await;
    assert_eq!(listed["asks"][0]["id"], id.as_str(), "{listed}");
    // A client of `a` that moves to `b` with `Last-Event-ID` hears of the pending ask first.
    assert_eq!(moving.next_event("ask").await["id"], id.as_str());
    moving.reconnect_to(&b.base).await;
    let first = moving.next().await;
    assert_eq!(first.event, "asks", "a resumed stream opens with the pending asks");
    let pending = turnstile_testkit::events::data(&first);
    assert_eq!(pending["asks"][0]["id"], id.as_str(), "{pending}");
    // Answered on `b`, run on `a`; a second answer, anywhere, is refused.
    let (status, body) = b.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(on_b.next_event("ask_closed").await["id"], id.as_str());
    assert_eq!(moving.next_event("ask_closed").await["id"], id.as_str(), "the moved stream");
    assert_eq!(a.outcome("r1").await, "completed");
    assert!(dir.path().join("made-by-bash").exists(), "the call ran on its owner");
    let (status, body) = a.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("ask_closed")), "{body}");
    // A cancel sent to `b` withdraws the next ask everywhere; an answer after it is refused.
    let other = r#"bash {"command":"touch never-made"}"#;
    let (status, _) =
        a.post("/v1/sessions/s/prompts", json!({"prompt": other, "run_id": "r2"})).await;
    assert_eq!(status, 202);
    let id = on_b.next_event("ask").await["id"].as_str().unwrap().to_owned();
    let (status, _) = b.post("/v1/sessions/s/cancel", json!({})).await;
    assert_eq!(status, 202);
    let closed = on_b.next_event("ask_closed").await;
    let why = (closed["id"].as_str(), closed["why"].as_str());
    assert_eq!(why, (Some(id.as_str()), Some("withdrawn")), "{closed}");
    assert_eq!(b.outcome("r2").await, "cancelled");
    let (status, _) = b.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!(status, 409);
    assert!(!dir.path().join("never-made").exists());
    let (_, listed) = a.get("/v1/asks").await;
    assert_eq!(listed["asks"], json!([]), "nothing pending anywhere");
    for m in [a, b] {
        m.host.shutdown().await.unwrap();
    }
}
