//! The chat page served at `/`: one HTML file with its script and style inline, no
//! build step and no external assets.

/// The page.
pub const INDEX_HTML: &str = include_str!("web/index.html");
