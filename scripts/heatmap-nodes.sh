#!/bin/sh
# heatmap-nodes.sh NODES HOURS: hourly samples (cardhour.sample.v1, JSON
# Lines on standard output) of one whole card on each of NODES nodes
# (gpu-node-00 …) for HOURS hours from 2026-11-01T00:00+08:00: the heat map's
# node × hour shape with one sample per cell. Two hours in three held by
# ai101; util unknown (null) on every tenth node, else varying by node and
# hour. docs/benchmarks.md fills a SQLite store with it.
set -eu
nodes=${1:?usage: heatmap-nodes.sh NODES HOURS}
hours=${2:?usage: heatmap-nodes.sh NODES HOURS}
start=$(date -u -d 2026-10-31T16:00:00Z +%s)
awk -v nodes="$nodes" -v hours="$hours" -v start="$start" 'BEGIN {
  for (h = 0; h < hours; h++) {
    ts = strftime("%Y-%m-%dT%H:%M:%SZ", start + 3600 * h, 1)
    for (n = 0; n < nodes; n++) {
      held = (n + h) % 3 != 0
      util = n % 10 == 0 ? "null" : sprintf("%.2f", ((n * 7 + h) % 100) / 100)
      printf "{\"schema\":\"cardhour.sample.v1\",\"ts\":\"%s\",\"interval_s\":3600,\"node\":\"gpu-node-%02d\",\"gpu_uuid\":\"GPU-%08x-0000-4000-8000-000000000001\",\"gpu_model\":\"NVIDIA A100-SXM4-80GB\",\"instance_id\":\"GPU-%08x-0000-4000-8000-000000000001\",\"profile\":\"full\",\"project\":\"%s\",\"user\":\"%s\",\"util\":%s,\"mem_used_bytes\":1000,\"mem_total_bytes\":85899345920,\"processes\":%d}\n", ts, n, n, n, held ? "ai101" : "", held ? "2025020004" : "", util, held ? 1 : 0
    }
  }
}'
