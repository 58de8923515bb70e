//! A session's chat (rule L09): its operator, its client and the org's
//! admins; stored with the session, rendered as text, never HTML.

use serde::{Deserialize, Serialize};

/// The longest message kept.
pub const MAX_CHAT_CHARS: usize = 1_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub at_ms: i64,
    pub author_id: String,
    pub author_name: String,
    pub body: String,
}

/// Why a message cannot be sent, if it cannot; the body to keep otherwise
/// (trimmed).
pub fn chat_body(body: &str) -> Result<String, String> {
    let body = body.trim();
    if body.is_empty() {
        return Err("Write a message first.".into());
    }
    if body.chars().count() > MAX_CHAT_CHARS {
        return Err(format!("Keep a message under {MAX_CHAT_CHARS} characters."));
    }
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l09_messages_are_trimmed_non_empty_and_bounded() {
        assert_eq!(chat_body("  on my way  ").unwrap(), "on my way");
        assert!(chat_body(" \n ").is_err());
        assert!(chat_body(&"x".repeat(MAX_CHAT_CHARS)).is_ok());
        assert!(chat_body(&"x".repeat(MAX_CHAT_CHARS + 1)).is_err());
        assert_eq!(chat_body("<b>hi</b>").unwrap(), "<b>hi</b>", "kept as typed; the page renders it as text");
    }
}
