//! The OpenAPI document (`src/openapi.json`, served at `GET /v1/openapi.json`) against the
//! router: the same operations, every `$ref` resolving, and the server's real answers valid
//! under the schemas the document gives for their statuses. CI also runs schemathesis
//! against a live `turnstile serve` with it (`.ci/schemathesis.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::{Running, TOKEN, answer, answers_hello, start};
use serde_json::{Value, json};
use turnstile_host::{Answer, EchoTool, ScriptedProvider, ToolSet, Usage};
use turnstile_server::OPENAPI;
use turnstile_testkit::events::data;

/// Every operation the router serves, as the document must list it.
const OPERATIONS: &[(&str, &str)] = &[
    ("get", "/v1/health"),
    ("get", "/v1/openapi.json"),
    ("get", "/v1/sessions"),
    ("get", "/v1/sessions/{session}"),
    ("get", "/v1/sessions/{session}/messages"),
    ("post", "/v1/sessions/{session}/prompts"),
    ("post", "/v1/sessions/{session}/cancel"),
    ("post", "/v1/sessions/{session}/clear"),
    ("post", "/v1/sessions/{session}/summarize"),
    ("get", "/v1/runs/{run_id}"),
    ("post", "/v1/runs/{run_id}/cancel"),
    ("get", "/v1/runs/{run_id}/wait"),
    ("get", "/v1/asks"),
    ("post", "/v1/asks/{ask_id}"),
    ("get", "/v1/events"),
];

/// The methods an OpenAPI path item can have.
const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch", "trace"];

fn document() -> Value {
    serde_json::from_str(OPENAPI).expect("the OpenAPI document is JSON")
}

/// The document's operations, as `(method, path)`.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("`paths` is an object");
    let mut ops = BTreeSet::new();
    for (path, item) in paths {
        for key in item.as_object().expect("a path item is an object").keys() {
            if METHODS.contains(&key.as_str()) {
                ops.insert((key.clone(), path.clone()));
            } else {
                assert!(
                    key == "parameters" || key == "summary" || key == "description",
                    "{path}: unexpected key {key}"
                );
            }
        }
    }
    ops
}

fn expected() -> BTreeSet<(String, String)> {
    OPERATIONS.iter().map(|(m, p)| ((*m).to_owned(), (*p).to_owned())).collect()
}

/// The routes `src/routes.rs` registers, read from its source: `.route("/path", get(handler))`,
/// also with chained methods (`get(a).post(b)`).
fn routes_in_source() -> BTreeSet<(String, String)> {
    let source = include_str!("../src/routes.rs");
    let mut out = BTreeSet::new();
    for (i, _) in source.match_indices(".route(\"") {
        let rest = &source[i + ".route(\"".len()..];
        let (path, rest) = rest.split_once('"').unwrap();
        // The method router, up to the `)` that closes `.route(`.
        let mut depth = 1;
        let mut end = 0;
        for (j, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let methods = rest[..end].trim_start_matches(',').trim();
        for call in methods.split(").") {
            let method = call.trim_start_matches('.').split('(').next().unwrap().trim();
            assert!(METHODS.contains(&method), "{path}: cannot read the method of `{methods}`");
            out.insert((method.to_owned(), path.to_owned()));
        }
    }
    out
}

/// `path` with each `{param}` filled with a dummy id.
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some((before, after)) = rest.split_once('{') {
        out.push_str(before);
        let (_, after) = after.split_once('}').unwrap();
        out.push_str("dummy-id");
        rest = after;
    }
    out.push_str(rest);
    out
}

#[test]
fn the_document_is_openapi_3_1_of_this_version() {
    let doc = document();
    let version = doc["openapi"].as_str().expect("`openapi` is a string");
    assert!(version.starts_with("3.1"), "{version}");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"), "`info.version`");
    assert_eq!(doc["security"], json!([{"bearer": []}]), "the token applies to every operation");
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

#[test]
fn the_document_lists_exactly_the_routes_of_the_router() {
    let doc = document();
    let expected = expected();
    assert_eq!(documented(&doc), expected, "the document's operations");
    // The source is the router: a route added there without the document fails here.
    assert_eq!(routes_in_source(), expected, "the routes of src/routes.rs");
}

#[test]
fn every_ref_resolves_and_every_component_is_used() {
    let doc = document();
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "{} refs: is the walk broken?", refs.len());
    for r in &refs {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("not a local $ref: {r}"));
        assert!(doc.pointer(pointer).is_some(), "$ref {r} resolves to nothing");
    }
    for kind in ["schemas", "responses", "parameters"] {
        for name in doc["components"][kind].as_object().unwrap().keys() {
            let target = format!("#/components/{kind}/{name}");
            assert!(refs.contains(&target), "{target} is never used");
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    out.push(v.as_str().expect("a $ref is a string").to_owned());
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_error_code_a_response_names_is_a_stable_code() {
    let doc = document();
    let stable: BTreeSet<&str> =
        doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
    let mut named = BTreeSet::new();
    let mut codes = Vec::new();
    collect_key(&doc["paths"], "enum", &mut codes);
    collect_key(&doc["components"]["responses"], "enum", &mut codes);
    for list in codes {
        for c in list.as_array().unwrap() {
            named.insert(c.as_str().unwrap().to_owned());
        }
    }
    // Under `paths`, the only enums are the codes each error status lists.
    for c in &named {
        assert!(stable.contains(c.as_str()), "`{c}` is not in the Error schema's codes");
    }
    for (method, path) in OPERATIONS {
        let responses = &doc["paths"][path][method]["responses"];
        for status in ["401", "403"] {
            assert!(responses[status].is_object(), "{method} {path}: no {status}");
        }
    }
}

fn collect_key(v: &Value, key: &str, out: &mut Vec<Value>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key {
                    out.push(v.clone());
                } else {
                    collect_key(v, key, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_key(v, key, out)),
        _ => {}
    }
}

/// Sends `method path` with the token (and an empty JSON object as the body of a POST).
async fn request(s: &Running, method: &str, path: &str) -> (u16, Value) {
    let method: reqwest::Method = method.to_uppercase().parse().unwrap();
    let mut req = s.http.request(method.clone(), s.url(path)).bearer_auth(TOKEN);
    if method == reqwest::Method::POST {
        req = req.json(&json!({}));
    }
    let resp = req.send().await.unwrap();
    if resp.headers().get("content-type").is_some_and(|t| t == "text/event-stream") {
        // The event stream does not end: its status is the answer.
        return (resp.status().as_u16(), Value::Null);
    }
    answer(resp).await
}

#[tokio::test]
async fn the_live_router_serves_what_the_document_lists_and_nothing_else() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    let doc = document();
    let ops = documented(&doc);
    let paths: BTreeSet<&String> = ops.iter().map(|(_, p)| p).collect();
    for path in &paths {
        let url = concrete(path);
        let url = if url.ends_with("/wait") { format!("{url}?timeout_ms=0") } else { url };
        for method in ["get", "post", "put", "delete", "patch"] {
            let (status, v) = request(&s, method, &url).await;
            let routed =
                !(status == 405 || (status == 404 && v["error"]["code"] == "no_such_route"));
            if ops.contains(&(method.to_owned(), (*path).clone())) {
                assert!(routed, "documented {method} {path} is not served: {status} {v}");
            } else {
                assert!(!routed, "undocumented {method} {path} is served: {status} {v}");
                assert_eq!(status, 405, "{method} {path}: {v}");
                assert_eq!(v["error"]["code"], "method_not_allowed");
            }
        }
    }
    for path in ["/v1", "/v1/session", "/v1/sessions/a/b/c", "/v1/runs", "/v2/health", "/"] {
        let (status, v) = request(&s, "get", path).await;
        assert_eq!((status, v["error"]["code"].as_str()), (404, Some("no_such_route")), "{path}");
    }
    // The document served is this one, as JSON.
    let r = s.http.get(s.url("/v1/openapi.json")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.text().await.unwrap(), OPENAPI);
}

// ---- the server's answers against the document's schemas --------------------------------------

/// A validator for the part of JSON Schema (2020-12) the document uses: enough to check that
/// the server's answers are what the document says. An unknown keyword fails the check, so
/// the document cannot grow past what this validates without this noticing.
struct Schemas<'a> {
    doc: &'a Value,
}

impl Schemas<'_> {
    fn resolve<'b>(&'b self, schema: &'b Value) -> &'b Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => self.resolve(self.doc.pointer(&r[1..]).expect("a $ref resolves")),
            None => schema,
        }
    }

    /// The reasons `v` is not valid under `schema` (empty: valid).
    fn errors(&self, schema: &Value, v: &Value, at: &str) -> Vec<String> {
        let schema = self.resolve(schema);
        let mut errs = Vec::new();
        let Some(map) = schema.as_object() else {
            return vec![format!("{at}: schema {schema} is not an object")];
        };
        for (k, s) in map {
            match k.as_str() {
                "$ref" | "description" | "default" | "example" | "title" => {}
                "type" => {
                    let types: Vec<&str> = match s {
                        Value::String(t) => vec![t.as_str()],
                        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                        _ => panic!("{at}: bad type {s}"),
                    };
                    if !types.iter().any(|t| has_type(v, t)) {
                        errs.push(format!("{at}: {v} is not of type {s}"));
                    }
                }
                "enum" => {
                    if !s.as_array().unwrap().contains(v) {
                        errs.push(format!("{at}: {v} is not one of {s}"));
                    }
                }
                "const" => {
                    if s != v {
                        errs.push(format!("{at}: {v} is not {s}"));
                    }
                }
                "minimum" => {
                    if v.as_f64().is_some_and(|n| n < s.as_f64().unwrap()) {
                        errs.push(format!("{at}: {v} < {s}"));
                    }
                }
                "maximum" => {
                    if v.as_f64().is_some_and(|n| n > s.as_f64().unwrap()) {
                        errs.push(format!("{at}: {v} > {s}"));
                    }
                }
                "maxItems" => {
                    if v.as_array().is_some_and(|a| a.len() as u64 > s.as_u64().unwrap()) {
                        errs.push(format!("{at}: more than {s} items"));
                    }
                }
                "minLength" | "maxLength" | "pattern" => {
                    // Only on requests' strings; answers are checked for their shape.
                }
                "required" => {
                    if let Some(obj) = v.as_object() {
                        for name in s.as_array().unwrap() {
                            if !obj.contains_key(name.as_str().unwrap()) {
                                errs.push(format!("{at}: no required field {name}"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let Some(obj) = v.as_object() {
                        for (name, sub) in s.as_object().unwrap() {
                            if let Some(value) = obj.get(name) {
                                errs.extend(self.errors(sub, value, &format!("{at}.{name}")));
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    assert_eq!(s, &Value::Bool(false), "{at}: only `false` is used");
                    if let Some(obj) = v.as_object() {
                        let known = map.get("properties").and_then(Value::as_object);
                        for name in obj.keys() {
                            if !known.is_some_and(|k| k.contains_key(name)) {
                                errs.push(format!("{at}: field {name} is not in the schema"));
                            }
                        }
                    }
                }
                "items" => {
                    if let Some(items) = v.as_array() {
                        for (i, item) in items.iter().enumerate() {
                            errs.extend(self.errors(s, item, &format!("{at}[{i}]")));
                        }
                    }
                }
                "allOf" => {
                    for sub in s.as_array().unwrap() {
                        errs.extend(self.errors(sub, v, at));
                    }
                }
                "anyOf" | "oneOf" => {
                    let each: Vec<Vec<String>> =
                        s.as_array().unwrap().iter().map(|sub| self.errors(sub, v, at)).collect();
                    let valid = each.iter().filter(|e| e.is_empty()).count();
                    let ok = if k == "oneOf" { valid == 1 } else { valid >= 1 };
                    if !ok {
                        errs.push(format!("{at}: {v} matches {valid} of the {k} schemas"));
                        // Why the closest one does not.
                        if let Some(closest) = each.iter().min_by_key(|e| e.len()) {
                            errs.extend(closest.iter().cloned());
                        }
                    }
                }
                "contains" => {
                    if let Some(items) = v.as_array()
                        && !items.iter().any(|item| self.errors(s, item, at).is_empty())
                    {
                        errs.push(format!("{at}: no item matches `contains`"));
                    }
                }
                "contentMediaType" => {
                    assert_eq!(s, "application/json", "{at}");
                    let Some(text) = v.as_str() else { continue };
                    match serde_json::from_str::<Value>(text) {
                        Ok(parsed) => {
                            if let Some(content) = map.get("contentSchema") {
                                errs.extend(self.errors(content, &parsed, &format!("{at}(json)")));
                            }
                        }
                        Err(e) => errs.push(format!("{at}: not JSON: {e}")),
                    }
                }
                "contentSchema" => {}
                other => panic!("{at}: keyword `{other}` is not checked by this test"),
            }
        }
        errs
    }

    /// The schema of the answer with `status` to `method path` (`application/json`, or the
    /// event stream's one event).
    fn answer_schema(&self, method: &str, path: &str, status: u16) -> &Value {
        let response = &self.doc["paths"][path][method]["responses"][status.to_string()];
        assert!(response.is_object(), "{method} {path}: status {status} is not documented");
        let response = self.resolve(response);
        let content = response["content"].as_object().unwrap();
        let media = content.values().next().expect("a documented body");
        &media["schema"]
    }

    fn check(&self, method: &str, path: &str, status: u16, body: &Value) {
        let schema = self.answer_schema(method, path, status);
        let errs = self.errors(schema, body, "$");
        assert!(errs.is_empty(), "{method} {path} {status}: {body}\n{}", errs.join("\n"));
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => panic!("unknown type {t}"),
    }
}

#[test]
fn the_schema_check_finds_answers_the_document_does_not_allow() {
    let doc = document();
    let schemas = Schemas { doc: &doc };
    let ok = json!({"status": "accepted", "request": "cancel"});
    let schema = schemas.answer_schema("post", "/v1/sessions/{session}/cancel", 202);
    assert!(schemas.errors(schema, &ok, "$").is_empty());
    for bad in [
        json!({"status": "accepted"}),
        json!({"status": "accepted", "request": "cancel", "extra": 1}),
        json!({"status": "done", "request": "cancel"}),
        json!({"status": "accepted", "request": "reboot"}),
    ] {
        assert!(!schemas.errors(schema, &bad, "$").is_empty(), "{bad}");
    }
    let error = schemas.answer_schema("get", "/v1/sessions/{session}", 404);
    let found = json!({"error": {"code": "session_not_found", "message": "m"}});
    assert!(schemas.errors(error, &found, "$").is_empty());
    let other = json!({"error": {"code": "run_not_found", "message": "m"}});
    assert!(!schemas.errors(error, &other, "$").is_empty(), "a code this status does not list");
    let event = &doc["components"]["schemas"]["ServerSentEvent"];
    let asks = json!({"event": "asks", "id": "1-2", "data": "{\"asks\":[]}"});
    assert!(schemas.errors(event, &asks, "$").is_empty());
    let wrong = json!({"event": "asks", "id": "1-2", "data": "{\"asks\":{}}"});
    assert!(!schemas.errors(event, &wrong, "$").is_empty(), "data checked by its event type");
}

#[tokio::test]
async fn the_answers_and_events_of_a_run_with_a_permission_ask_are_as_documented() {
    let tools = ToolSet::new().with(EchoTool { name: "echo".into(), delay_ms: 0 });
    // The answer streams in pieces over several commits: its text goes out as deltas.
    let provider = ScriptedProvider::new(|req, _| {
        if req.messages.iter().any(|m| matches!(m, turnstile_host::RequestMessage::ToolResults(_)))
        {
            // Usage reported, so the RunComplete carries the run's (checked against the doc).
            let usage =
                Usage { input_tokens: 30, output_tokens: 9, cost_micros: 12, ..Usage::default() };
            Answer::streamed("The echo said x; that is all it said.", 6, 50, usage)
        } else {
            Answer::tool_call("c1", "echo", r#"{"text":"x"}"#)
        }
    });
    let s = start(provider, tools, |_| {}).await;
    let doc = document();
    let schemas = Schemas { doc: &doc };
    let mut events = s.events(Some("0-0")).await;
    let get = async |path: &str, doc_path: &str| {
        let (status, v) = s.get(path).await;
        schemas.check("get", doc_path, status, &v);
        v
    };

    let (status, v) =
        s.post("/v1/sessions/s/prompts", json!({"prompt": "use echo", "run_id": "r1"})).await;
    schemas.check("post", "/v1/sessions/{session}/prompts", status, &v);
    assert_eq!(status, 202);
    let mut frames = Vec::new();
    let ask = loop {
        let f = events.next().await;
        frames.push(f.clone());
        if f.event == "ask" {
            break data(&f);
        }
    };
    let pending = get("/v1/asks", "/v1/asks").await;
    assert_eq!(pending["asks"][0]["id"], ask["id"]);
    let id = ask["id"].as_str().unwrap();
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    schemas.check("post", "/v1/asks/{ask_id}", status, &v);
    assert_eq!(status, 200);
    frames.extend(events.until_run_complete("r1").await);
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "deny"})).await;
    schemas.check("post", "/v1/asks/{ask_id}", status, &v);
    assert_eq!(status, 409);

    // Every event as documented, and every type of a run with an ask among them.
    let event = &doc["components"]["schemas"]["ServerSentEvent"];
    let mut types = BTreeSet::new();
    for f in &frames {
        let framed = json!({"event": f.event, "id": f.id, "data": f.data});
        let errs = schemas.errors(event, &framed, "$");
        assert!(errs.is_empty(), "{framed}\n{}", errs.join("\n"));
        types.insert(f.event.as_str());
    }
    let want = ["ask", "ask_closed", "asks", "message", "message_delta", "run_complete", "session"];
    assert_eq!(types, want.into_iter().collect(), "the event types seen");
    let done = frames.iter().find(|f| f.event == "run_complete").map(data).unwrap();
    assert_eq!(
        done["usage"],
        json!({"prompt_tokens": 3 + 30, "completion_tokens": 5 + 9, "cost_micros": 12}),
        "both steps: the tool call step reported none (the host estimated it: tokens, no cost), the answer its own: {done}"
    );
    let with_call = frames.iter().filter(|f| f.event == "message").map(data).find(|m| {
        m["message"]["calls"].as_array().is_some_and(|c| !c.is_empty())
            && m["message"]["results"].as_array().is_some_and(|r| !r.is_empty())
    });
    assert!(with_call.is_some(), "a message with its call and result was checked");

    // The read side, with what the run left.
    get("/v1/health", "/v1/health").await;
    get("/v1/sessions", "/v1/sessions").await;
    get("/v1/sessions?all=true", "/v1/sessions").await;
    get("/v1/sessions/s", "/v1/sessions/{session}").await;
    let page = get("/v1/sessions/s/messages", "/v1/sessions/{session}/messages").await;
    assert!(page["messages"].as_array().unwrap().len() >= 2, "{page}");
    get("/v1/sessions/s/messages?limit=1", "/v1/sessions/{session}/messages").await;
    // `after=0` pages from the first message, as no `after` does.
    let first = get("/v1/sessions/s/messages?after=0", "/v1/sessions/{session}/messages").await;
    assert_eq!(first["messages"], page["messages"]);
    // An `after` that is no message: 400, also above the store's integers (once a 500).
    for after in ["99999999999999999999", "18446744073709551615", "9223372036854775808"] {
        let path = format!("/v1/sessions/s/messages?after={after}");
        let (status, v) = s.get(&path).await;
        schemas.check("get", "/v1/sessions/{session}/messages", status, &v);
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_query")), "{path}");
    }
    get("/v1/runs/r1", "/v1/runs/{run_id}").await;
    get("/v1/runs/r1/wait", "/v1/runs/{run_id}/wait").await;
    get("/v1/runs/nope/wait?timeout_ms=x", "/v1/runs/{run_id}/wait").await;
    get("/v1/runs/nope", "/v1/runs/{run_id}").await;
    get("/v1/sessions/nope", "/v1/sessions/{session}").await;
    get("/v1/events?last_event_id=nope", "/v1/events").await;
    for path in ["/v1/sessions/s/cancel", "/v1/sessions/s/clear", "/v1/sessions/s/summarize"] {
        let (status, v) = s.post(path, json!({})).await;
        let doc_path = path.replacen("/s/", "/{session}/", 1);
        schemas.check("post", &doc_path, status, &v);
    }
    let (status, v) = s.post("/v1/runs/r1/cancel", json!({})).await;
    schemas.check("post", "/v1/runs/{run_id}/cancel", status, &v);
    // Refusals.
    let r = s.http.get(s.url("/v1/sessions")).send().await.unwrap();
    let (status, v) = answer(r).await;
    schemas.check("get", "/v1/sessions", status, &v);
    let r = s
        .http
        .get(s.url("/v1/asks"))
        .bearer_auth(TOKEN)
        .header("Origin", "https://example.com")
        .send()
        .await
        .unwrap();
    let (status, v) = answer(r).await;
    schemas.check("get", "/v1/asks", status, &v);
    let (status, v) =
        s.post("/v1/sessions/s/prompts", json!({"prompt": "x", "run_id": "r1"})).await;
    schemas.check("post", "/v1/sessions/{session}/prompts", status, &v);
    assert_eq!(status, 409);

    // A long poll that times out, on a run that does not finish in time.
    let s = start(ScriptedProvider::new(|_, _| Answer::hang()), ToolSet::new(), |_| {}).await;
    s.prompt("h", "hangs", "r2").await;
    let (status, v) = s.get("/v1/runs/r2/wait?timeout_ms=20").await;
    schemas.check("get", "/v1/runs/{run_id}/wait", status, &v);
    assert_eq!(v, json!({"finished": false}));
    let (status, v) = s.get("/v1/runs/r2").await;
    schemas.check("get", "/v1/runs/{run_id}", status, &v);
    let (status, v) = s.post("/v1/sessions/h/summarize", json!({})).await;
    schemas.check("post", "/v1/sessions/{session}/summarize", status, &v);
    assert_eq!(status, 409);
    s.server.shutdown().await.unwrap();
    let (status, v) = s.get("/v1/health").await;
    schemas.check("get", "/v1/health", status, &v);
    assert_eq!(status, 503);
    let (status, v) = s.post("/v1/sessions/h/prompts", json!({"prompt": "late"})).await;
    schemas.check("post", "/v1/sessions/{session}/prompts", status, &v);
    assert_eq!(status, 503);
}
