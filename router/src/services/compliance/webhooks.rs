//! Breach webhooks: signed deliveries of new incidents with retries, claimed so two routers deliver once.
