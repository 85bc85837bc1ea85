-- OAuth access tokens are held between requests like API keys (src/apps/key-cache.ts), so every
-- change that can stop one working notifies the same channel at commit (drizzle/0008; its name is
-- kept so that instances of the previous release keep hearing it during a rolling deploy): an
-- access token revoked, shortened, re-scoped or removed, its grant revoked, re-scoped or removed
-- (a user's or an app's rows deleted cascade here). The apps trigger of 0008 covers app deletion.
-- Row-level with a WHEN on the token's kind: a refresh token's rotation (every refresh) notifies
-- nothing and so does not empty every instance's cache. PostgreSQL delivers one notification per
-- transaction for a channel and payload however many rows fire.
CREATE TRIGGER "oauth_access_tokens_changes_notify"
  AFTER UPDATE OF "revoked_at", "expires_at", "scopes", "token_hash", "grant_id", "kind"
  ON "oauth_tokens" FOR EACH ROW WHEN (OLD."kind" = 'access' OR NEW."kind" = 'access')
  EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "oauth_access_tokens_delete_notify"
  AFTER DELETE ON "oauth_tokens" FOR EACH ROW WHEN (OLD."kind" = 'access')
  EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "oauth_tokens_truncate_notify"
  AFTER TRUNCATE ON "oauth_tokens" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "oauth_grants_changes_notify"
  AFTER UPDATE OF "revoked_at", "scopes", "user_id", "app_id" OR DELETE
  ON "oauth_grants" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "oauth_grants_truncate_notify"
  AFTER TRUNCATE ON "oauth_grants" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();
