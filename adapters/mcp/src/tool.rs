//! One MCP tool as a turnstile [`Tool`]: a call is a `tools/call`, bounded by the server's
//! timeout; an aborted call (its future dropped) sends `notifications/cancelled`.

use std::sync::Arc;

use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;
use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::connection::Connection;

/// A tool of an MCP server, offered under its prefixed name ([`crate::name`]); made by
/// [`connect_all`](crate::connect_all).
///
/// A call sends `tools/call` with the call's input as the arguments. Its result is the text of
/// the result's content, one block a line (an embedded text resource is its text; anything
/// else is a short note such as `[image: image/png]`; with no content, the structured
/// content as JSON), an error result when the server says `isError`. A call also gets an
/// error result, never a hang or a panic, when:
/// - the input is not a JSON object;
/// - the server answers with a JSON-RPC error (an unknown tool, invalid arguments);
/// - it takes longer than the server's `timeout_secs` ("MCP server `s`: the call to `t` timed
///   out after N s"; the server is sent a cancellation);
/// - a stdio server stops during the call ("MCP server `s` stopped during the call to `t`:
///   it exited (exit status: 3); its stderr ends with: ..."); every later call to it then fails
///   at once ("MCP server `s` has stopped: ...");
/// - an HTTP server's response stream breaks and cannot be reopened ("MCP server `s`: the
///   connection closed before the call to `t` was answered", within a few seconds); a later
///   call to a server that is gone fails as soon as its connection is refused.
///
/// An aborted call's future is dropped ([`ToolSpec::new`]: `OnAbort::Drop`); rmcp's request
/// guard then sends `notifications/cancelled` with the request's id, so the server can stop
/// its work.
#[derive(Clone, Debug)]
pub struct McpTool {
    connection: Arc<Connection>,
    name: String,
    tool: Arc<rmcp::model::Tool>,
}

impl McpTool {
    pub(crate) fn new(
        connection: Arc<Connection>,
        name: String,
        tool: rmcp::model::Tool,
    ) -> McpTool {
        McpTool { connection, name, tool: Arc::new(tool) }
    }

    /// The name the model calls it by (`mcp_<server>_<tool>`, see [`crate::name`]).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's name (its key under `[mcp]`).
    #[must_use]
    pub fn server(&self) -> &str {
        &self.connection.server
    }

    /// The tool's name on its server.
    #[must_use]
    pub fn remote_name(&self) -> &str {
        &self.tool.name
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name.clone())
    }

    /// The server's description (its title when it has none) and input schema; a schema
    /// without a `type` gets `"type": "object"`, which providers require.
    fn definition(&self) -> ToolDef {
        let description =
            self.tool.description.as_deref().or(self.tool.title.as_deref()).unwrap_or_default();
        let mut schema = (*self.tool.input_schema).clone();
        schema.entry("type").or_insert_with(|| Value::String("object".into()));
        ToolDef::new(self.name.clone(), description).with_schema(Value::Object(schema))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let (connection, tool) = (self.connection.clone(), self.tool.name.to_string());
        Box::pin(async move { call_tool(&connection, &tool, &call.input).await })
    }
}

async fn call_tool(connection: &Connection, tool: &str, input: &str) -> ToolOutput {
    let server = &connection.server;
    if let Some(reason) = connection.stopped() {
        return ToolOutput::error(format!("MCP server `{server}` has stopped: {reason}"));
    }
    let mut params = CallToolRequestParams::new(tool.to_owned());
    match arguments(input) {
        Ok(Some(arguments)) => params = params.with_arguments(arguments),
        Ok(None) => {}
        Err(e) => return ToolOutput::error(e),
    }
    let secs = connection.timeout_secs;
    let timeout = std::time::Duration::from_secs(secs);
    // On a timeout `timeout` drops the call's future, and rmcp's guard inside it sends
    // `notifications/cancelled`, as it does when the host drops this whole future.
    match tokio::time::timeout(timeout, connection.peer.call_tool(params)).await {
        Ok(Ok(result)) => output(result),
        Err(_) => ToolOutput::error(format!(
            "MCP server `{server}`: the call to `{tool}` timed out after {secs} s (the server \
             was told to cancel it)"
        )),
        Ok(Err(ServiceError::McpError(e))) => ToolOutput::error(format!(
            "MCP server `{server}` refused the call to `{tool}`: {} (JSON-RPC error {})",
            e.message, e.code.0
        )),
        Ok(Err(e)) => {
            let closed = matches!(e, ServiceError::TransportClosed);
            // Over stdio a closed transport is the whole connection; over HTTP it may be just
            // this call's response stream.
            let ended = (closed && connection.stdio) || connection.peer.is_transport_closed();
            match if ended { connection.stop_reason().await } else { None } {
                Some(reason) => ToolOutput::error(format!(
                    "MCP server `{server}` stopped during the call to `{tool}`: {reason}"
                )),
                None if closed => ToolOutput::error(format!(
                    "MCP server `{server}`: the connection closed before the call to `{tool}` \
                     was answered"
                )),
                None => ToolOutput::error(format!(
                    "MCP server `{server}`: the call to `{tool}` failed: {}",
                    crate::connection::innermost(&e)
                )),
            }
        }
    }
}

/// The call's input as `tools/call` arguments: a JSON object (blank input: none).
fn arguments(input: &str) -> Result<Option<serde_json::Map<String, Value>>, String> {
    if input.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(input) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(other) => Err(format!("the input must be a JSON object, not {}", kind(&other))),
        Err(e) => Err(format!("the input is not valid JSON: {e}")),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `tools/call` result as the model reads it.
fn output(result: CallToolResult) -> ToolOutput {
    let mut text = result.content.iter().map(block_text).collect::<Vec<_>>().join("\n");
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    if result.is_error == Some(true) { ToolOutput::error(text) } else { ToolOutput::ok(text) }
}

/// One content block: text as it is, anything else summarized.
fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image: {}]", i.mime_type),
        ContentBlock::Audio(a) => format!("[audio: {}]", a.mime_type),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => match mime_type {
                Some(mime) => format!("[resource: {uri} ({mime})]"),
                None => format!("[resource: {uri}]"),
            },
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        _ => "[content of a kind turnstile does not show]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_joined_and_non_text_summarized() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("two"),
        ]);
        assert_eq!(output(result), ToolOutput::ok("one\n[image: image/png]\ntwo"));
        let result = CallToolResult::error(vec![ContentBlock::text("bad")]);
        assert_eq!(output(result), ToolOutput::error("bad"));
    }

    #[test]
    fn input_must_be_an_object() {
        assert_eq!(arguments("  "), Ok(None));
        assert!(arguments(r#"{"a":1}"#).unwrap().is_some());
        assert_eq!(arguments("[1]"), Err("the input must be a JSON object, not an array".into()));
        assert!(arguments("{").unwrap_err().starts_with("the input is not valid JSON"));
    }
}
