-- Every server instance keeps the API keys it has looked up for a few seconds (src/apps/key-cache.ts)
-- and LISTENs on api_key_changes: any change that can stop a key working (revoked, rolled,
-- re-scoped, its app deleted or handed over, rows removed) notifies every instance at commit,
-- whichever process made it (the server, another instance, the admin CLI, SQL by hand).
-- Statement-level: one notification per statement, none for last_used_at or a key's name.
CREATE FUNCTION "notify_api_key_changes"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_key_changes', '');
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "api_keys_changes_notify"
  AFTER UPDATE OF "revoked_at", "expires_at", "scopes", "key_hash", "environment", "app_id" OR DELETE
  ON "api_keys" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "api_keys_truncate_notify"
  AFTER TRUNCATE ON "api_keys" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "apps_changes_notify"
  AFTER UPDATE OF "deleted_at", "owner_id" OR DELETE
  ON "apps" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();--> statement-breakpoint
CREATE TRIGGER "apps_truncate_notify"
  AFTER TRUNCATE ON "apps" FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_key_changes"();
