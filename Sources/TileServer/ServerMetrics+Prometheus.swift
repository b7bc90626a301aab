import CoreMetrics
public import Prometheus

extension ServerMetrics {
    /// Bootstraps swift-metrics with swift-prometheus for the whole process, once, before the server
    /// is made: request latencies in buckets from 100 us to 30 s, build times from 100 ms to 30 min.
    /// - Returns: the registry to answer `/metrics` from (``TileServer/metricsRegistry``).
    public static func bootstrapPrometheus() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30
        ]
        .map { Duration.nanoseconds(Int64($0 * 1e9)) }
        factory.durationHistogramBuckets["tiler_build_duration_seconds"] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800]
            .map { Duration.nanoseconds(Int64($0 * 1e9)) }
        MetricsSystem.bootstrap(factory)
        return registry
    }
}
