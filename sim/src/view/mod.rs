//! `turnstile-sim view`: a trace as a timeline, in one self-contained HTML file.
//!
//! [`model`] replays the trace through the core and says what to draw (lanes, bars, spans,
//! marks, where replay failed); [`page`] writes the HTML: the model as embedded JSON and a
//! small script that draws it as plain SVG. No library, no network: the file opens from disk
//! in any browser, and what it draws comes from the core's own outputs.

pub mod model;
pub mod page;

pub use model::{Model, Summary, build};
pub use page::render;
