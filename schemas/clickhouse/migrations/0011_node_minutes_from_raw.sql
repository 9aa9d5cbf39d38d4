-- Fill node_minutes from the raw samples written before version 10, once
-- (running it again only inserts rows merges collapse, see 0010). The
-- modulus is an Int64: 18.16 types Int64 % 60000 as Int16, which wraps.
INSERT INTO node_minutes (ts, minute_ms, node)
SELECT toDateTime(intDiv(greatest(m, 0), 1000)), m, node
FROM (SELECT start_ms - start_ms % toInt64(60000) AS m, node FROM raw_samples GROUP BY m, node)
