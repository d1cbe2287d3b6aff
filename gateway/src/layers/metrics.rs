//! Prometheus metrics of the REST edge: request counts and a latency
//! histogram by API, method, route and status, served at `/metrics`.
//!
//! Written here rather than pulled in: the text format is small, and the
//! edge only needs a counter and a histogram.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// The histogram's upper bounds (seconds), as `le` labels them.
pub fn bucket_bounds() -> &'static [f64] {
    &BUCKETS
}

/// One series of [`Metrics::snapshot`]: its labels, its count and sum of
/// seconds, and how many requests took at most each of
/// [`bucket_bounds`] (cumulative, as Prometheus' `le` buckets).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesSnapshot {
    pub api: String,
    pub method: String,
    pub route: String,
    pub status: u16,
    pub count: u64,
    pub sum: f64,
    pub buckets: Vec<u64>,
}

/// A series' labels: API, method, route, status.
type Labels = (String, String, String, u16);

/// Shared, cheap to clone.
#[derive(Clone, Default)]
pub struct Metrics {
    series: Arc<Mutex<BTreeMap<Labels, Series>>>,
}

impl Metrics {
    pub fn observe(&self, api: &str, method: &str, route: &str, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        // A poisoned lock only means a panic elsewhere mid-update; the
        // numbers are still usable.
        let mut map = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let s = map.entry((api.to_string(), method.to_string(), route.to_string(), status)).or_default();
        s.count += 1;
        s.sum += secs;
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                s.buckets[i] += 1;
            }
        }
    }

    /// Every series as it stands, for the console's charts.
    pub fn snapshot(&self) -> Vec<SeriesSnapshot> {
        let map = self.series.lock().unwrap_or_else(|p| p.into_inner());
        map.iter()
            .map(|((api, method, route, status), s)| SeriesSnapshot {
                api: api.clone(),
                method: method.clone(),
                route: route.clone(),
                status: *status,
                count: s.count,
                sum: s.sum,
                buckets: s.buckets.to_vec(),
            })
            .collect()
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let map = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        out.push_str("# HELP keelson_http_requests_total HTTP requests answered by the gateway.\n");
        out.push_str("# TYPE keelson_http_requests_total counter\n");
        for ((api, method, route, status), s) in map.iter() {
            let _ = writeln!(
                out,
                "keelson_http_requests_total{{api=\"{api}\",method=\"{method}\",route=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                s.count
            );
        }
        out.push_str("# HELP keelson_http_request_duration_seconds Time to answer an HTTP request.\n");
        out.push_str("# TYPE keelson_http_request_duration_seconds histogram\n");
        for ((api, method, route, status), s) in map.iter() {
            let labels = format!("api=\"{api}\",method=\"{method}\",route=\"{}\",status=\"{status}\"", escape(route));
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "keelson_http_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(out, "keelson_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "keelson_http_request_duration_seconds_sum{{{labels}}} {}", s.sum);
            let _ = writeln!(out, "keelson_http_request_duration_seconds_count{{{labels}}} {}", s.count);
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counter_and_histogram() {
        let m = Metrics::default();
        m.observe("placement", "GET", "/resource_providers", 200, Duration::from_millis(3));
        m.observe("placement", "GET", "/resource_providers", 200, Duration::from_millis(30));
        let text = m.render();
        assert!(text.contains(
            "keelson_http_requests_total{api=\"placement\",method=\"GET\",route=\"/resource_providers\",status=\"200\"} 2"
        ));
        assert!(text.contains("le=\"0.005\"} 1"));
        assert!(text.contains("le=\"+Inf\"} 2"));
        let snapshot = m.snapshot();
        assert_eq!(snapshot.len(), 1);
        assert_eq!((snapshot[0].route.as_str(), snapshot[0].count), ("/resource_providers", 2));
        let at = |le: f64| snapshot[0].buckets[bucket_bounds().iter().position(|b| *b == le).unwrap()];
        assert_eq!((at(0.001), at(0.005), at(0.05)), (0, 1, 2));
    }
}
