-- Mark every hour of the raw samples written before version 21, once, so
-- that util_hours computes them. The modulus is an Int64: 18.16 types a
-- smaller literal's remainder narrowly.
INSERT INTO sample_hours (ts, bucket_ms, writer)
SELECT toDateTime(intDiv(greatest(h, 0), 1000)), h, 'migration'
FROM (SELECT DISTINCT start_ms - start_ms % toInt64(3600000) AS h FROM raw_samples)
