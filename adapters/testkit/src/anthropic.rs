//! Anthropic message streams (`text/event-stream` bodies) in the exact shape of the recorded
//! ones, for the fake provider to send: a text answer, a tool call, a paced answer, a half
//! answer and the mid-stream error that fails it.
//!
//! Pure functions of their arguments: no IO, no time (a paced answer's pauses are part of the
//! pieces it returns). Bytes only, so that the server that sends them depends on this module
//! and not the other way round.

/// One event of the stream.
fn event(name: &str, data: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The `message_start` event of message `id`.
fn message_start(id: &str) -> String {
    event(
        "message_start",
        &serde_json::json!({"type": "message_start", "message": {
            "model": "claude-sonnet-4-20250514", "id": id, "type": "message", "role": "assistant",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}}}),
    )
}

/// The message's last delta (its stop reason and usage) and its stop event.
fn message_end(stop: &str) -> String {
    event(
        "message_delta",
        &serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"input_tokens": 100, "output_tokens": 20}}),
    ) + &event("message_stop", &serde_json::json!({"type": "message_stop"}))
}

/// A text block at index 0 streamed as `pieces`; `close`: with its stop event.
fn text_block(pieces: &[&str], close: bool) -> String {
    let mut s = event(
        "content_block_start",
        &serde_json::json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
    );
    for piece in pieces {
        s += &text_delta(piece);
    }
    if close {
        s += &event(
            "content_block_stop",
            &serde_json::json!({"type": "content_block_stop", "index": 0}),
        );
    }
    s
}

/// A piece of the text block at index 0.
fn text_delta(piece: &str) -> String {
    event(
        "content_block_delta",
        &serde_json::json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": piece}}),
    )
}

/// The opening of a text answer: its message start, its text block and `text` (the first
/// piece of a paced reply whose next piece is [`overloaded_event`]).
pub fn text_opening(text: &str) -> Vec<u8> {
    (message_start("msg_partial") + &text_block(&[text], false)).into_bytes()
}

/// Anthropic's mid-stream `overloaded_error` event (retryable), as the API sends it.
pub fn overloaded_event() -> Vec<u8> {
    event(
        "error",
        &serde_json::json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    .into_bytes()
}

/// An answer that is only text, streamed a word at a time as a model streams it.
pub fn text_stream(text: &str) -> Vec<u8> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    (message_start("msg_text") + &text_block(&words, true) + &message_end("end_turn")).into_bytes()
}

/// An answer that is only text, a word every `every_ms` milliseconds (as a model writes; more
/// than the store's 33 ms debounce, so most words are a commit of their own): the pieces of a
/// `Reply::Paced`, each after its pause in milliseconds.
pub fn paced_text(text: &str, every_ms: u64) -> Vec<(u64, Vec<u8>)> {
    let mut pieces = vec![(0, (message_start("msg_paced") + &text_block(&[], false)).into_bytes())];
    for word in text.split_inclusive(' ') {
        pieces.push((every_ms, text_delta(word).into_bytes()));
    }
    let end =
        event("content_block_stop", &serde_json::json!({"type": "content_block_stop", "index": 0}))
            + &message_end("end_turn");
    pieces.push((0, end.into_bytes()));
    pieces
}

/// An answer with a short text and one tool call whose arguments stream in three pieces, in
/// the shape of the recorded Anthropic tool streams.
pub fn tool_stream(id: &str, name: &str, input: &serde_json::Value) -> Vec<u8> {
    tool_stream_raw(id, name, &input.to_string())
}

/// The same with the arguments as the model streamed them, valid JSON or not.
pub fn tool_stream_raw(id: &str, name: &str, json: &str) -> Vec<u8> {
    let mut s = message_start(&format!("msg_{id}"));
    s += &text_block(&[&format!("Using {name}.")], true);
    s += &event(
        "content_block_start",
        &serde_json::json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    );
    let cut = |n: usize| {
        let mut i = n.min(json.len());
        while !json.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    let (a, b) = (cut(json.len() / 3), cut(2 * json.len() / 3));
    for piece in [&json[..a], &json[a..b], &json[b..]] {
        s += &event(
            "content_block_delta",
            &serde_json::json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": piece}}),
        );
    }
    s += &event(
        "content_block_stop",
        &serde_json::json!({"type": "content_block_stop", "index": 1}),
    );
    s += &message_end("tool_use");
    s.into_bytes()
}

/// Response body `n` of the recorded Anthropic case `case` (a folder of the repository's
/// fixtures; see [`crate::fixtures::response_body`]).
pub fn recorded(case: &str, n: usize) -> Vec<u8> {
    crate::fixtures::response_body(turnstile_wire::Api::AnthropicMessages, case, n)
}
