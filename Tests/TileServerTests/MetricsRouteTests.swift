import Testing

@testable import TileServer

/// The route label each request path is counted under, as the metrics' documentation names them.
@Suite("Metrics' route labels")
struct MetricsRouteTests {
    @Test(
        "every kind of path gets its label",
        arguments: [
            ("/dzi/photo_files/11/0_0.jpg", ServerMetrics.Route.dziTile),
            ("/dzi/photo.dzi", .dziDescriptor),
            ("/dzi/photo_files/11/0_0.dzi", .dziDescriptor),
            ("/iiif/3/photo/info.json", .iiifInfo),
            ("/iiif/2/photo/info.json", .iiifInfo),
            ("/iiif/3/photo", .iiifInfo),  // the 303 to info.json
            ("/iiif/3/photo/", .iiifInfo),
            ("/iiif/3/photo/full/max/0/default.jpg", .iiifImage),
            ("/iiif//3//photo/full/256,/0/default.jpg", .iiifImage),
            ("/images/photo", .upload),
            ("/", .pages),
            ("/view/photo", .pages),
            ("/health", .health),
            ("/ready", .ready),
            ("/metrics", .metrics),
            ("/favicon.ico", .other),
            ("/dzi", .other),
            ("/health/x", .other),
            ("/images", .other)
        ])
    func labels(path: String, route: ServerMetrics.Route) {
        #expect(TileAddress(path: path[...]).route == route, "\(path)")
    }
}
