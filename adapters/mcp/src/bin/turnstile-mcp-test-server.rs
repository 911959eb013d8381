//! `turnstile-mcp-test-server`: the project's own MCP server for turnstile-mcp's tests (and a
//! manual check against a real client). Built with rmcp's server side.
//!
//! It is a bin rather than an example so that cargo builds it before the integration tests
//! and tells them where it is (`CARGO_BIN_EXE_turnstile-mcp-test-server`), also when one test
//! file is run alone.
//!
//! ```text
//! turnstile-mcp-test-server                serve MCP over stdin and stdout
//! turnstile-mcp-test-server --http         serve streamable HTTP on 127.0.0.1 (a free port),
//!                                          printing the endpoint's URL as the first stdout line
//! turnstile-mcp-test-server --hang         read nothing, answer nothing (a handshake that hangs)
//! turnstile-mcp-test-server --exit CODE    write a line to stderr and exit with CODE at once
//! ```
//!
//! Both servers exit when stdin closes. `--cancel-log FILE` (or the environment variable
//! `TURNSTILE_MCP_TEST_CANCEL_LOG`) names a file that `sleep` appends `started` to when it
//! starts and `cancelled` to when its call is cancelled (`notifications/cancelled`).
//!
//! Tools: `echo {text}` returns `text`; `sleep {ms}` waits `ms` milliseconds; `crash` exits the
//! process (code 3) before answering; `fail` returns an `isError` result; `mixed` returns a text,
//! an image and a text; `cwd` returns the working directory; `header {name}` returns the value of
//! the HTTP request's header `name` (over HTTP only).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// The variable naming the cancellation log when `--cancel-log` is not given.
const CANCEL_LOG_VAR: &str = "TURNSTILE_MCP_TEST_CANCEL_LOG";

#[derive(Clone)]
struct TestServer {
    cancel_log: Option<PathBuf>,
}

impl TestServer {
    fn log(&self, line: &str) {
        if let Some(path) = &self.cancel_log {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
            if let Ok(mut file) = file {
                let _ = writeln!(file, "{line}");
            }
        }
    }
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("the schemas below are objects") };
    Tool::new(name, description, Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    vec![
        tool(
            "echo",
            "Returns its text.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ),
        tool(
            "sleep",
            "Waits ms milliseconds.",
            json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
        ),
        tool("crash", "Exits the server before answering.", none.clone()),
        tool("fail", "Returns an error result.", none.clone()),
        tool("mixed", "Returns a text, an image and a text.", none.clone()),
        tool("cwd", "Returns the working directory.", none),
        tool(
            "header",
            "Returns the value of an HTTP request header.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
    ]
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t)]).into())
}

fn arg<'a>(request: &'a CallToolRequestParams, key: &str) -> Option<&'a Value> {
    request.arguments.as_ref().and_then(|a| a.get(key))
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info =
            Implementation::new("turnstile-mcp-test-server", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "echo" => text(arg(&request, "text").and_then(Value::as_str).unwrap_or_default()),
            "sleep" => {
                let ms = arg(&request, "ms").and_then(Value::as_u64).unwrap_or(0);
                self.log("started");
                tokio::select! {
                    biased;
                    () = context.ct.cancelled() => {
                        self.log("cancelled");
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                    () = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("slept {ms} ms")),
                }
            }
            "crash" => {
                eprintln!("crashing as asked");
                std::process::exit(3);
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("failed as asked")]).into()),
            "mixed" => Ok(CallToolResult::success(vec![
                ContentBlock::text("before"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
                ContentBlock::text("after"),
            ])
            .into()),
            "cwd" => {
                text(std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default())
            }
            "header" => {
                let name = arg(&request, "name").and_then(Value::as_str).unwrap_or_default();
                let parts = context.extensions.get::<http::request::Parts>();
                let value = parts.and_then(|p| p.headers.get(name)).and_then(|v| v.to_str().ok());
                text(value.unwrap_or("(none)"))
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other:?}"), None)),
        }
    }
}

/// Exits when stdin closes (the client went away), for the HTTP server; the stdio server's
/// transport ends then by itself.
async fn exit_when_stdin_closes() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 1024];
    while let Ok(1..) = stdin.read(&mut buf).await {}
    std::process::exit(0);
}

async fn serve_http(server: TestServer) -> std::io::Result<()> {
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}/mcp", listener.local_addr()?);
    std::io::stdout().flush()?;
    tokio::spawn(exit_when_stdin_closes());
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

async fn serve_stdio(server: TestServer) -> Result<(), Box<dyn std::error::Error>> {
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut mode = "stdio";
    let mut cancel_log = std::env::var_os(CANCEL_LOG_VAR).map(PathBuf::from);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--http" => mode = "http",
            "--hang" => mode = "hang",
            "--cancel-log" => cancel_log = args.next().map(PathBuf::from),
            "--exit" => {
                let code = args.next().and_then(|c| c.parse().ok()).unwrap_or(1);
                eprintln!("exiting at start as asked");
                std::process::exit(code);
            }
            other => {
                eprintln!("turnstile-mcp-test-server: unknown argument {other:?}");
                std::process::exit(64);
            }
        }
    }
    let server = TestServer { cancel_log };
    let result = match mode {
        "http" => serve_http(server).await.map_err(Into::into),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
        _ => serve_stdio(server).await,
    };
    if let Err(e) = result {
        eprintln!("turnstile-mcp-test-server: {e}");
        std::process::exit(1);
    }
    // Exit at once: the runtime would wait for the thread blocked reading stdin.
    std::process::exit(0);
}
