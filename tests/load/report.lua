-- wrk script for scripts/loadtest.sh: one machine-readable line per run.
-- errors counts failed connections, reads, writes and timeouts; non2xx counts answers >= 400.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f errors=%d non2xx=%d bytes=%d\n",
    summary.requests, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.connect + e.read + e.write + e.timeout, e.status, summary.bytes))
end
