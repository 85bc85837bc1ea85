-- GET /api/v1/events?wait= (long polling, src/webhooks/event-waiters.ts): every server instance
-- LISTENs on webhook_events, and each statement that records events notifies at commit, once per
-- app and environment it recorded events for (payload `app_id:environment`), whichever process
-- or door wrote them (a listing write, a batch, a ping, the admin CLI), so a waiting request on
-- any instance is answered within moments. Nothing is sent for a statement that rolls back.
-- The cost: PostgreSQL serialises the commits of notifying transactions (a brief lock while each
-- appends to the notification queue), paid by every write that records an event.
CREATE FUNCTION "notify_webhook_events"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  scope text;
BEGIN
  FOR scope IN SELECT DISTINCT app_id::text || ':' || environment::text FROM new_events LOOP
    PERFORM pg_notify('webhook_events', scope);
  END LOOP;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "webhook_events_notify"
  AFTER INSERT ON "webhook_events" REFERENCING NEW TABLE AS "new_events"
  FOR EACH STATEMENT EXECUTE FUNCTION "notify_webhook_events"();
