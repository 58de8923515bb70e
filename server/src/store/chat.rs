//! A session's chat messages (rule L09).

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::chat::ChatMessage;
use domain::event_log::{ChatPosted, LogEvent};
use async_trait::async_trait;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ChatRow {
    pub at: i64,
    pub author_id: String,
    pub author_name: String,
    pub body: String,
}

impl From<ChatRow> for ChatMessage {
    fn from(r: ChatRow) -> ChatMessage {
        ChatMessage { at_ms: r.at, author_id: r.author_id, author_name: r.author_name, body: r.body }
    }
}

#[async_trait]
pub trait ChatStore: Send + Sync {
    /// `author_role`: `operator` (the attached one), `admin` or `client`.
    async fn add_chat(&self, org_id: &str, session_id: &str, author_id: &str, author_role: &str, at: i64, body: &str) -> StoreResult<()>;
    /// The session's messages, oldest first.
    async fn chat(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<ChatRow>>;
}

macro_rules! chat_store {
    ($store:ident) => {
        #[async_trait]
        impl ChatStore for $store {
            async fn add_chat(&self, org_id: &str, session_id: &str, author_id: &str, author_role: &str, at: i64, body: &str) -> StoreResult<()> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                sqlx::query("INSERT INTO chat_messages (org_id, session_id, author_id, author_role, at, body) VALUES ($1, $2, $3, $4, $5, $6)")
                    .bind(org_id).bind(session_id).bind(author_id).bind(author_role).bind(at).bind(body)
                    .execute(&mut *tx).await?;
                let robot_id: Option<String> = sqlx::query_scalar("SELECT robot_id FROM sessions WHERE id = $1").bind(session_id).fetch_optional(&mut *tx).await?;
                // Metadata only: the text stays in ClutchCall.
                let event = LogEvent::ChatPosted(ChatPosted { author_id: author_id.into(), author_role: author_role.into(), length: body.chars().count() });
                Self::log_event(&mut tx, super::Logged { org_id, at, session_id: Some(session_id), robot_id: robot_id.as_deref(), event }).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn chat(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<ChatRow>> {
                Ok(sqlx::query_as(
                    "SELECT c.at, c.author_id, u.display_name AS author_name, c.body FROM chat_messages c \
                     JOIN users u ON u.id = c.author_id WHERE c.org_id = $1 AND c.session_id = $2 ORDER BY c.id",
                )
                .bind(org_id).bind(session_id).fetch_all(&self.pool).await?)
            }
        }
    };
}

chat_store!(SqliteStore);
chat_store!(PgStore);
