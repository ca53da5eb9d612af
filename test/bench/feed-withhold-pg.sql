-- [FEED6] The marking of a Denied's scope on PostgreSQL, on a change log of 1,000,000 records,
-- without and with changes_path_c (a scratch table; nothing of Weft's is touched).
-- Run: psql -h 127.0.0.1 -U postgres -d test -f test/bench/feed-withhold-pg.sql
DROP TABLE IF EXISTS bench_feed_withhold;
CREATE TABLE bench_feed_withhold (version bigint PRIMARY KEY, path text NOT NULL, node_type text NOT NULL, kind text NOT NULL, withheld text);
INSERT INTO bench_feed_withhold SELECT g, 'space' || (g % 60) || '/doc' || g, 'Document', 'Updated', NULL FROM generate_series(1, 1000000) g;
CREATE INDEX bench_feed_withhold_path ON bench_feed_withhold (path, version);
ANALYZE bench_feed_withhold;
\timing on
-- a small scope (19 records):
BEGIN; UPDATE bench_feed_withhold SET withheld = 'u' WHERE (path COLLATE "C" = 'space7/doc1000' OR (path COLLATE "C" >= 'space7/doc100' AND path COLLATE "C" < 'space7/doc101')) AND version <= 900000; ROLLBACK;
-- a large one (15,000 records):
BEGIN; UPDATE bench_feed_withhold SET withheld = 'u' WHERE (path COLLATE "C" = 'space7' OR (path COLLATE "C" >= 'space7/' AND path COLLATE "C" < 'space70')) AND version <= 900000; ROLLBACK;
\timing off
CREATE INDEX bench_feed_withhold_path_c ON bench_feed_withhold ((path COLLATE "C"), version);
ANALYZE bench_feed_withhold;
\timing on
-- a small scope (19 records):
BEGIN; UPDATE bench_feed_withhold SET withheld = 'u' WHERE (path COLLATE "C" = 'space7/doc1000' OR (path COLLATE "C" >= 'space7/doc100' AND path COLLATE "C" < 'space7/doc101')) AND version <= 900000; ROLLBACK;
-- a large one (15,000 records):
BEGIN; UPDATE bench_feed_withhold SET withheld = 'u' WHERE (path COLLATE "C" = 'space7' OR (path COLLATE "C" >= 'space7/' AND path COLLATE "C" < 'space70')) AND version <= 900000; ROLLBACK;
\timing off
DROP TABLE bench_feed_withhold;
