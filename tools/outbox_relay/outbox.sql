-- The outbox table conduit-outbox-relay reads (tools/outbox_relay/README.md).
--
-- The application inserts one row per event in the same transaction as the state change it
-- describes; the relay publishes unpublished rows in sequence order and sets published_at once
-- the broker acknowledged them. Apply with: psql "$CONNINFO" -f tools/outbox_relay/outbox.sql
--
-- Another table name: create it with the same columns and attach the same trigger; the relay
-- (--outbox-table) LISTENs on the channel named like the table (without its schema), which the
-- trigger function notifies with TG_TABLE_NAME.

CREATE TABLE IF NOT EXISTS conduit_outbox (
  sequence          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- publish order
  event_id          text NOT NULL UNIQUE,         -- record event id: the dedup window's key
  event_type        text NOT NULL,                -- header event-type
  aggregate_id      text NOT NULL,                -- record key (one aggregate, one partition)
  aggregate_version bigint NOT NULL,              -- header aggregate-version
  occurred_at       timestamptz NOT NULL DEFAULT now(),  -- record event time
  payload           bytea,                        -- record value (NULL: no value)
  headers           jsonb NOT NULL DEFAULT '{}'::jsonb    -- string fields become headers
                    CHECK (jsonb_typeof(headers) = 'object'),
  published_at      timestamptz                   -- NULL until the broker acknowledged it
);

-- The relay's read: unpublished rows by sequence. Partial, so it stays as small as the backlog.
CREATE INDEX IF NOT EXISTS conduit_outbox_unpublished
  ON conduit_outbox (sequence) WHERE published_at IS NULL;

-- One notification per inserting statement (the relay reads in batches; the payload is unused).
CREATE OR REPLACE FUNCTION conduit_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(TG_TABLE_NAME, '');
  RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER conduit_outbox_notify AFTER INSERT ON conduit_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION conduit_outbox_notify();
