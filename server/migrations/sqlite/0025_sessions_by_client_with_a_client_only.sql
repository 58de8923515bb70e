-- The client index holds only sessions a client owns (issue "Engine v3"),
-- as PostgreSQL's has since postgres/0017. Most calls have no client, and
-- each new one wrote its entry, (org, NULL), at the index's right end: on
-- the queue path a page of the WAL a batch (9 % of its frames, BENCHMARKS.md,
-- Engine v3 seventeenth part). The one read it serves names the client
-- (`s.client_id = $2`, which implies the index's condition); the calls no
-- client owns are read through the org's day index (test
-- `store::booking::tests::a_clients_sessions_are_searched_by_the_client`).
DROP INDEX sessions_by_client;
CREATE INDEX sessions_by_client ON sessions(org_id, client_id) WHERE client_id IS NOT NULL;
