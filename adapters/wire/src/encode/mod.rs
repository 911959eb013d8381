//! Encoding a request: a [`ModelRequest`] and its [`Target`] into the API's JSON body.
//!
//! Every API gets the same conversation: the system prompt, user messages (text attachments
//! inline after the text, images as the API's image parts when the model takes them, a short
//! note otherwise), assistant messages with their reasoning state (only that of the same API,
//! [`crate::ReasoningState`]) and tool calls, and tool results right after their calls. The
//! body always asks for a stream, and for usage in it.

pub mod anthropic;
mod body;
mod chat;
mod responses;

use serde_json::Value;

use crate::Api;
use crate::request::ModelRequest;
use crate::target::Target;

/// The JSON body of `request` for `api`, sent to `target`'s model.
#[must_use]
pub fn encode(api: Api, request: &ModelRequest, target: &Target) -> Value {
    match api {
        Api::OpenAiChat => chat::encode(request, target),
        Api::OpenAiResponses => responses::encode(request, target),
        Api::AnthropicMessages => anthropic::encode(request, target),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use turnstile_core::{Attachment, SessionId};

    use super::*;
    use crate::request::{RequestKind, RequestMessage};

    fn request() -> ModelRequest {
        let attachments = vec![
            Attachment {
                name: "a.txt".into(),
                media_type: "text/plain".into(),
                content: "hello".into(),
            },
            Attachment {
                name: "p.png".into(),
                media_type: "image/png".into(),
                content: "iVBOR".into(),
            },
        ];
        ModelRequest {
            session: SessionId::new("s"),
            kind: RequestKind::Step,
            messages: vec![RequestMessage::User { text: "look".into(), attachments }],
            tools: vec![],
        }
    }

    const INLINE: &str = "look\n\n<file name=\"a.txt\">\nhello\n</file>";

    #[test]
    fn text_files_go_inline_and_images_as_each_api_s_image_part() {
        let target = Target::new("m");
        let chat = encode(Api::OpenAiChat, &request(), &target);
        assert_eq!(
            chat["messages"][0]["content"],
            json!([
                {"type": "text", "text": INLINE},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            ])
        );
        let responses = encode(Api::OpenAiResponses, &request(), &target);
        assert_eq!(
            responses["input"][0]["content"][1],
            json!({"type": "input_image", "image_url": "data:image/png;base64,iVBOR"})
        );
        let anthropic = encode(Api::AnthropicMessages, &request(), &target);
        assert_eq!(
            anthropic["messages"][0]["content"][1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"})
        );
    }

    #[test]
    fn a_model_without_images_gets_a_note_instead() {
        let mut target = Target::new("m");
        target.images = false;
        let chat = encode(Api::OpenAiChat, &request(), &target);
        assert_eq!(
            chat["messages"][0]["content"],
            json!(format!(
                "{INLINE}\n\n[attachment p.png (image/png) not sent: the model does not take it]"
            ))
        );
    }
}
