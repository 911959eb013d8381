//! Who may call, and what a malformed request gets (SPEC 9 "Server"): 401 without the token on
//! every route, 403 for a browser origin not allowed, 413 over the body limit, and a clean 400
//! or 404 with a JSON error for odd ids, never a 5xx.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TOKEN, answer, start};
use turnstile_host::ToolSet;

/// Every route of the API, with a path that names something.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/s"),
    ("GET", "/v1/sessions/s/messages"),
    ("POST", "/v1/sessions/s/prompts"),
    ("POST", "/v1/sessions/s/cancel"),
    ("POST", "/v1/sessions/s/clear"),
    ("POST", "/v1/sessions/s/summarize"),
    ("GET", "/v1/runs/r"),
    ("POST", "/v1/runs/r/cancel"),
    ("GET", "/v1/runs/r/wait"),
    ("GET", "/v1/asks"),
    ("POST", "/v1/asks/a"),
    ("GET", "/v1/events"),
    ("GET", "/v1/no-such-route"),
];

fn provider() -> turnstile_host::ScriptedProvider {
    common::answers("ok", 1, 1)
}

#[tokio::test]
async fn no_token_or_a_wrong_one_is_401_on_every_route() {
    let s = start(provider(), ToolSet::new(), |_| {}).await;
    for (method, path) in ROUTES {
        let method: reqwest::Method = method.parse().unwrap();
        for auth in
            [None, Some("Bearer wrong"), Some("Bearer "), Some(TOKEN), Some("Basic dGVzdA==")]
        {
            let mut req = s.http.request(method.clone(), s.url(path)).body("{}");
            if let Some(a) = auth {
                req = req.header("Authorization", a);
            }
            let (status, v) = answer(req.send().await.unwrap()).await;
            assert_eq!(status, 401, "{method} {path} with {auth:?}: {v}");
            assert_eq!(v["error"]["code"], "unauthorized");
        }
    }
}

#[tokio::test]
async fn a_browser_origin_is_refused_unless_allowed() {
    let s = start(provider(), ToolSet::new(), |c| {
        c.allowed_origins = vec!["http://localhost:3000".into()]
    })
    .await;
    for origin in ["https://evil.example", "null", "http://localhost:3001"] {
        let r = s
            .http
            .get(s.url("/v1/sessions"))
            .bearer_auth(TOKEN)
            .header("Origin", origin)
            .send()
            .await
            .unwrap();
        let (status, v) = answer(r).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (403, Some("origin_not_allowed")),
            "{origin}"
        );
    }
    // Even with the right token, and before the token is looked at.
    let r = s
        .http
        .post(s.url("/v1/sessions/s/prompts"))
        .header("Origin", "https://evil.example")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = s
        .http
        .get(s.url("/v1/sessions"))
        .bearer_auth(TOKEN)
        .header("Origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_and_other_limits_400() {
    let s = start(provider(), ToolSet::new(), |c| {
        c.limits.body_bytes = 4096;
        c.limits.prompt_bytes = 100;
        c.limits.attachments = 1;
    })
    .await;
    let raw = |body: String| {
        let req = s.http.post(s.url("/v1/sessions/s/prompts")).bearer_auth(TOKEN).body(body);
        async move { answer(req.send().await.unwrap()).await }
    };
    let (status, v) = raw(format!(r#"{{"prompt":"{}"}}"#, "x".repeat(5000))).await;
    assert_eq!((status, v["error"]["code"].as_str()), (413, Some("payload_too_large")), "{v}");
    let (status, v) =
        s.post("/v1/sessions/s/prompts", serde_json::json!({"prompt": "y".repeat(101)})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("prompt_too_long")));
    let a = serde_json::json!({"name": "a.txt", "media_type": "text/plain", "content": "x"});
    let (status, v) = s
        .post("/v1/sessions/s/prompts", serde_json::json!({"prompt": "y", "attachments": [a, a]}))
        .await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("too_many_attachments")));
    for bad in ["", "not json", r#"{"prompt": 3}"#, r#"{"prompt": "x", "extra": 1}"#, "[]"] {
        let (status, v) = raw(bad.to_owned()).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("invalid_json")),
            "{bad:?}: {v}"
        );
    }
    let (status, v) = s.post("/v1/sessions/s/prompts", serde_json::json!({"prompt": ""})).await;
    assert_eq!((status, v["error"]["message"].as_str()), (400, Some("prompt is empty")));
    // Too many streams.
    let s = start(provider(), ToolSet::new(), |c| c.limits.streams = 1).await;
    let _one = s.events(None).await;
    let (status, v) = s.get("/v1/events").await;
    assert_eq!((status, v["error"]["code"].as_str()), (503, Some("too_many_streams")));
}

#[tokio::test]
async fn odd_ids_in_the_path_are_a_clean_400_or_404() {
    let s = start(provider(), ToolSet::new(), |_| {}).await;
    let long = "x".repeat(300);
    let cases: &[(&str, &str, u16)] = &[
        ("GET", "/v1/sessions/a%2Fb", 404),
        ("GET", "/v1/sessions/a/b", 404),
        ("GET", "/v1/sessions/a$$b", 404),
        ("POST", "/v1/sessions/a$$b/prompts", 400),
        ("GET", "/v1/sessions/%FF%FE", 400),
        ("GET", "/v1/runs/%FF", 400),
        ("GET", "/v1/runs/%00", 400),
        ("GET", "/v1/runs/..%2F..%2Fetc", 404),
        ("GET", "/v1/runs/$$", 404),
        ("POST", "/v1/runs/%C3%28/cancel", 400),
        // An id of only whitespace is refused, like an empty one.
        ("GET", "/v1/sessions/%20", 400),
    ];
    for (method, path, want) in cases {
        let req = s
            .http
            .request(method.parse().unwrap(), s.url(path))
            .bearer_auth(TOKEN)
            .body(r#"{"prompt":"hi"}"#);
        let (status, v) = answer(req.send().await.unwrap()).await;
        assert_eq!(status, *want, "{method} {path}: {v}");
        assert!(v["error"]["code"].is_string(), "{method} {path}: a JSON error, got {v}");
    }
    for path in [format!("/v1/sessions/{long}"), format!("/v1/runs/{long}/wait")] {
        let (status, v) = s.get(&path).await;
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_id")), "{v}");
    }
    let (status, v) =
        s.post("/v1/sessions/s/prompts", serde_json::json!({"prompt": "x", "run_id": long})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_id")));
    let (status, v) = s.post("/v1/health", serde_json::json!({})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (405, Some("method_not_allowed")));
}
