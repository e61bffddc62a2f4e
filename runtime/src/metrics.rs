//! `/metrics`: the server's counters in the Prometheus/OpenMetrics text format
//! (`prometheus-client`): requests by endpoint and status, HTTP and job latency histograms,
//! queue depth and wait, batch sizes, model calls and the canvas tokens they committed (tokens
//! per forward is `redraft_canvas_tokens_total / redraft_forwards_total`, or the per-job
//! histogram).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// `fim` or `edit`.
    pub kind: String,
    /// `answered`, `cancelled`, `no_model`, `invalid`, `failed`, `backend_failed`,
    /// `rejected_full`, `rejected_shutdown`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabels {
    /// `full` (every position recomputed), `window` (the canvases, the rest from the cache) or
    /// `realign` (a kept cache realigned across an edit of the context: the canvases and the
    /// positions near each change recomputed).
    pub pass: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StartLabels {
    /// `kept` (from the cache an earlier job left) or `cold` (none shared enough of its text).
    pub start: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefreshLabels {
    /// `done` (the cache is exact again), `stopped` (a job came first; the cache is as it was)
    /// or `failed` (the cache was dropped).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

fn latency_buckets() -> Histogram {
    // 1 ms .. ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Every metric the server exports; cheap to share (`Arc`).
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_seconds: Family<EndpointLabels, Histogram>,
    pub jobs: Family<JobLabels, Counter>,
    pub job_seconds: Family<KindLabels, Histogram>,
    pub queue_wait_seconds: Histogram,
    pub queue_depth: Gauge,
    pub running: Gauge,
    pub batch_size: Histogram,
    pub forwards: Counter,
    pub passes: Family<PassLabels, Counter>,
    pub canvas_tokens: Counter,
    pub tokens_per_forward: Histogram,
    pub stream_drafts: Counter<u64, AtomicU64>,
    pub held_steps: Counter,
    pub cache_starts: Family<StartLabels, Counter>,
    pub idle_refreshes: Family<RefreshLabels, Counter>,
    pub requeued: Family<KindLabels, Counter>,
    pub kept_caches: Gauge,
    pub kept_bytes: Gauge,
    pub open_connections: Gauge,
    pub refused_connections: Counter,
    pub body_timeouts: Counter,
    pub write_timeouts: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "redraft_http_requests",
            "HTTP requests answered, by endpoint and status code",
            requests.clone(),
        );
        let request_seconds =
            Family::<EndpointLabels, Histogram>::new_with_constructor(latency_buckets as fn() -> _);
        registry.register(
            "redraft_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response body (a stream's last event)",
            request_seconds.clone(),
        );
        let jobs = Family::<JobLabels, Counter>::default();
        registry.register(
            "redraft_jobs",
            "Inference jobs by kind and how they ended",
            jobs.clone(),
        );
        let job_seconds =
            Family::<KindLabels, Histogram>::new_with_constructor(latency_buckets as fn() -> _);
        registry.register(
            "redraft_job_duration_seconds",
            "Time from a job's queueing to its answer (queue wait included)",
            job_seconds.clone(),
        );
        let queue_wait_seconds = latency_buckets();
        registry.register(
            "redraft_queue_wait_seconds",
            "Time jobs waited in the queue before the model took them",
            queue_wait_seconds.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "redraft_queue_depth",
            "Jobs waiting for the model (or for a worker, those sent to a remote backend)",
            queue_depth.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "redraft_running_jobs",
            "Jobs being worked on, by the model or a remote backend",
            running.clone(),
        );
        let batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 8));
        registry.register(
            "redraft_batch_size",
            "Canvases in each model call",
            batch_size.clone(),
        );
        let forwards = Counter::default();
        registry.register("redraft_forwards", "Model calls made", forwards.clone());
        let passes = Family::<PassLabels, Counter>::default();
        registry.register(
            "redraft_passes",
            "Model calls by pass: full (every position) or window (the canvases only)",
            passes.clone(),
        );
        let canvas_tokens = Counter::default();
        registry.register(
            "redraft_canvas_tokens",
            "Canvas slots the model calls filled (EOS padding included), over all canvases",
            canvas_tokens.clone(),
        );
        let tokens_per_forward = Histogram::new(exponential_buckets(0.5, 2.0, 10));
        registry.register(
            "redraft_tokens_per_forward",
            "Per job: its canvas slots filled per model call it took part in",
            tokens_per_forward.clone(),
        );
        let stream_drafts = Counter::default();
        registry.register(
            "redraft_stream_drafts",
            "Denoising-step drafts sent to diffusing streams",
            stream_drafts.clone(),
        );
        let held_steps = Counter::default();
        registry.register(
            "redraft_held_steps",
            "Steps of a job held back for a call because an older job's prompt piece went in it",
            held_steps.clone(),
        );
        let idle_refreshes = Family::<RefreshLabels, Counter>::default();
        registry.register(
            "redraft_idle_refreshes",
            "Kept caches recomputed exactly while the model had nothing else to do, by outcome",
            idle_refreshes.clone(),
        );
        let requeued = Family::<KindLabels, Counter>::default();
        registry.register(
            "redraft_jobs_requeued",
            "Jobs run ahead of any request (a precomputed next edit) that made way mid-run for a request and were queued again",
            requeued.clone(),
        );
        let cache_starts = Family::<StartLabels, Counter>::default();
        registry.register(
            "redraft_cache_starts",
            "Jobs by where their context cache came from: kept (an earlier job's, realigned) or cold",
            cache_starts.clone(),
        );
        let kept_caches = Gauge::default();
        registry.register(
            "redraft_kept_caches",
            "Caches finished jobs left for their clients' next requests",
            kept_caches.clone(),
        );
        let kept_bytes = Gauge::default();
        registry.register(
            "redraft_kept_cache_bytes",
            "Memory the kept caches hold (keys, values and the text they are matched on), of --cache-memory",
            kept_bytes.clone(),
        );
        let open_connections = Gauge::default();
        registry.register(
            "redraft_open_connections",
            "Client connections being served (at most --max-connections)",
            open_connections.clone(),
        );
        let refused_connections = Counter::default();
        registry.register(
            "redraft_refused_connections",
            "Connections closed at once because their address already held --max-connections-per-peer",
            refused_connections.clone(),
        );
        let body_timeouts = Counter::default();
        registry.register(
            "redraft_body_timeouts",
            "Requests whose body did not arrive within --body-timeout-ms (answered 408)",
            body_timeouts.clone(),
        );
        let write_timeouts = Counter::default();
        registry.register(
            "redraft_write_timeouts",
            "Connections closed because their client took none of a response for --write-timeout-ms",
            write_timeouts.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            jobs,
            job_seconds,
            queue_wait_seconds,
            queue_depth,
            running,
            batch_size,
            forwards,
            passes,
            canvas_tokens,
            tokens_per_forward,
            stream_drafts,
            held_steps,
            cache_starts,
            idle_refreshes,
            requeued,
            kept_caches,
            kept_bytes,
            open_connections,
            refused_connections,
            body_timeouts,
            write_timeouts,
        }
    }

    pub fn request(&self, endpoint: &str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.to_string(),
                status: status.to_string(),
            })
            .inc();
        self.request_seconds
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    pub fn job(&self, kind: &str, outcome: &str) {
        self.jobs
            .get_or_create(&JobLabels {
                kind: kind.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn job_done(&self, kind: &str, elapsed: Duration) {
        self.job_seconds
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// `forwards` model calls of `canvases` canvases each, filling `tokens` slots in all.
    pub fn model_calls(&self, forwards: usize, canvases: usize, tokens: usize) {
        self.forwards.inc_by(forwards as u64);
        self.canvas_tokens.inc_by(tokens as u64);
        for _ in 0..forwards {
            self.batch_size.observe(canvases as f64);
        }
    }

    pub fn passes(&self, full: usize, window: usize, realign: usize) {
        for (pass, n) in [("full", full), ("window", window), ("realign", realign)] {
            self.passes
                .get_or_create(&PassLabels {
                    pass: pass.to_string(),
                })
                .inc_by(n as u64);
        }
    }

    /// A job's context cache: `kept` from an earlier job, or cold.
    pub fn cache_start(&self, kept: bool) {
        self.cache_starts
            .get_or_create(&StartLabels {
                start: if kept { "kept" } else { "cold" }.to_string(),
            })
            .inc();
    }

    /// A job run ahead of any request made way for one and was queued again.
    pub fn requeued(&self, kind: &str) {
        self.requeued
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// An idle refresh of a kept cache ended: `done`, `stopped` or `failed`.
    pub fn idle_refresh(&self, outcome: &str) {
        self.idle_refreshes
            .get_or_create(&RefreshLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_in_openmetrics_text() {
        let metrics = Metrics::new();
        metrics.request("/v1/completions", 200, Duration::from_millis(12));
        metrics.job("fim", "answered");
        metrics.model_calls(3, 2, 10);
        metrics.queue_depth.set(4);
        let text = metrics.render();
        for line in [
            "redraft_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1",
            "redraft_jobs_total{kind=\"fim\",outcome=\"answered\"} 1",
            "redraft_forwards_total 3",
            "redraft_canvas_tokens_total 10",
            "redraft_batch_size_sum 6.0",
            "redraft_batch_size_count 3",
            "redraft_queue_depth 4",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
