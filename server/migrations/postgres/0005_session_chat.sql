-- The session chat (rule L09) is also the org's admins': authors may be
-- admins too.
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_author_role_check;
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_author_role_check
    CHECK (author_role IN ('client', 'operator', 'admin'));
