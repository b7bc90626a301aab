import Foundation
public import Testing

/// A real S3-compatible object store on loopback: OpenStack Swift with its `s3api` layer (Debian's
/// `swift-proxy`, `swift-account`, `swift-container`, `swift-object`, `memcached`), started by
/// `scripts/s3-server.sh` in a folder of its own and stopped after.
public final class S3TestServer {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/s3-server.sh").path
    static let programs = ["swift-proxy-server", "swift-account-server", "swift-container-server", "swift-object-server", "memcached"]
    public static var isAvailable: Bool { programs.allSatisfy { Tools.path($0) != nil } }
    public static let skip = Comment(
        rawValue: "needs OpenStack Swift: apt-get install swift-proxy swift-account swift-container swift-object memcached")

    public let folder: String
    /// `http://127.0.0.1:PORT`, and the region and credentials the store takes.
    public let endpoint: String
    public let region: String
    public let accessKey: String
    public let secretKey: String

    /// Why the store did not start.
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    public init() throws {
        folder = NSTemporaryDirectory() + "s3-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        // Five ports from one below the kernel's ephemeral range (32768 and up on Linux), where no
        // outgoing connection (another test's) takes one while the store starts; another store started
        // at once by another suite may still pick the same: the script then says so, and another base is
        // tried, up to four.
        // The store is stopped when this process ends, even killed (the script's watcher): never left running.
        let owner = ["S3_SERVER_OWNER": String(ProcessInfo.processInfo.processIdentifier)]
        var run = try Tools.run("bash", [Self.script, "start", folder, String(Int.random(in: 20_000..<32_000))], environment: owner)
        for _ in 0..<3 where run.status != 0 && (run.stderr.contains("in use") || run.stderr.contains("Could not bind")) {
            run = try Tools.run("bash", [Self.script, "start", folder, String(Int.random(in: 20_000..<32_000))], environment: owner)
        }
        guard run.status == 0,
            let line = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").last(where: { $0.hasPrefix("endpoint=") })
        else {
            _ = try? Tools.run("bash", [Self.script, "stop", folder])
            throw StartFailure(description: "scripts/s3-server.sh start: \(run.stderr)")
        }
        var fields: [String: String] = [:]
        for part in line.split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        (endpoint, region) = (fields["endpoint"] ?? "", fields["region"] ?? "us-east-1")
        (accessKey, secretKey) = (fields["access_key"] ?? "", fields["secret_key"] ?? "")
    }

    /// The environment `tiler` reads the store from (AWS's variables).
    public var environment: [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey, "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region]
    }

    /// Stops the store's servers, keeping its objects: ``resume()`` starts it again on the same port.
    public func pause() {
        _ = try? Tools.run("bash", [Self.script, "stop", folder])
    }

    /// Starts the store again after ``pause()``, on the same port, with its objects.
    public func resume() throws {
        guard let port = URL(string: endpoint)?.port else { throw StartFailure(description: "no port in \(endpoint)") }
        let owner = ["S3_SERVER_OWNER": String(ProcessInfo.processInfo.processIdentifier)]
        let run = try Tools.run("bash", [Self.script, "start", folder, String(port)], environment: owner)
        guard run.status == 0 else { throw StartFailure(description: "scripts/s3-server.sh start (again): \(run.stderr)") }
    }

    public func stop() {
        _ = try? Tools.run("bash", [Self.script, "stop", folder])
        try? FileManager.default.removeItem(atPath: folder)
    }
}
