//! The HTML page of a view: the model embedded as JSON, the stylesheet and the drawing
//! script inlined, so one file holds everything and needs no network.

use super::Model;

const STYLE: &str = include_str!("view.css");
const SCRIPT: &str = include_str!("view.js");

/// The page of `model`, titled with the trace's name or `title`.
#[must_use]
pub fn render(model: &Model, title: &str) -> String {
    // `</` would end the script element early; `<\/` is the same JSON string.
    let data =
        serde_json::to_string(model).unwrap_or_else(|_| "null".to_owned()).replace("</", "<\\/");
    let title = escape(model.name.as_deref().unwrap_or(title));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title} · turnstile trace</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <script type=\"application/json\" id=\"trace-data\">{data}</script>\n\
         <script>\n{SCRIPT}</script>\n</body>\n</html>\n"
    )
}

/// Text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
