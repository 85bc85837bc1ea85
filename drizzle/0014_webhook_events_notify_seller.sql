-- GET /api/v1/events?wait= wakes only the waiters who may see an event (src/webhooks/
-- event-waiters.ts, issue #43 item 4): the notification names the seller too, once per distinct
-- app, environment and seller a statement recorded events for (payload
-- `app_id:environment:seller_id`, the seller empty for a ping). A waiting API key of that app
-- and environment reads again on each; a waiting OAuth token only on its own seller's. Before,
-- one event woke every waiter of the app's environment, tokens of every other user included.
-- Rolling deploy: the payload comes from the database, so once the first server of this release
-- has migrated, every notification has three parts. A server of the previous release looks the
-- whole payload up as `app_id:environment` and finds no waiter: its waiters then answer on their
-- timer (at most `wait`, 30 s) until it is replaced (docs/webhooks.md). A server of this release
-- still takes a two-part payload (drizzle/0012's) as "every waiter of the app's environment".
CREATE OR REPLACE FUNCTION "notify_webhook_events"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  scope text;
BEGIN
  FOR scope IN
    SELECT DISTINCT app_id::text || ':' || environment::text || ':' || coalesce(seller_id::text, '')
    FROM new_events
  LOOP
    PERFORM pg_notify('webhook_events', scope);
  END LOOP;
  RETURN NULL;
END
$$;
