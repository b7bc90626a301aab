public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Outside programs the tests run when they are installed (libtiff's tools, libjpeg's, vips, IIPImage,
/// OpenSlide, nginx): found on the PATH, run with their output in files (no pipe can fill up).
public enum Tools {
    /// The program's path, or nil when it is not installed.
    public static func path(_ name: String) -> String? {
        if name.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let folders =
            (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
            + ["/usr/sbin", "/usr/bin", "/sbin"]
        return folders.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A loopback port nothing listens on now (bound to port 0, read back, closed).
    public static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 ? getsockname(fd, $0, &length) : -1 }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether every program named is installed.
    public static func have(_ names: String...) -> Bool { names.allSatisfy { path($0) != nil } }

    /// The Debian package that installs each program the tests run.
    static let packages: [String: String] = [
        "opj_compress": "libopenjp2-tools", "opj_decompress": "libopenjp2-tools", "vips": "libvips-tools", "vipsheader": "libvips-tools",
        "djpeg": "libjpeg-turbo-progs", "cjpeg": "libjpeg-turbo-progs", "jpegtran": "libjpeg-turbo-progs", "pnmtopng": "netpbm",
        "pngtopnm": "netpbm", "pnmtotiff": "netpbm", "pnmtotiffcmyk": "netpbm", "tifftopnm": "netpbm", "tiffinfo": "libtiff-tools",
        "tiffdump": "libtiff-tools", "tiffcp": "libtiff-tools", "tiffset": "libtiff-tools", "openslide-show-properties": "openslide-tools",
        "spawn-fcgi": "spawn-fcgi", "nginx": "nginx-light", "/usr/lib/iipimage-server/iipsrv.fcgi": "iipimage-server", "flock": "util-linux",
        "varnishd": "varnish", "varnishadm": "varnish", "prometheus": "prometheus", "systemd-analyze": "systemd", "chromium": "chromium",
        "dwebp": "webp", "webpmux": "webp", "cwebp": "webp", "avifdec": "libavif-bin", "avifenc": "libavif-bin", "ojph_compress": "openjph-tools",
        "grk_compress": "grokj2k-tools",
        "curl": "curl"
    ]

    /// A skip message naming what is missing and the Debian packages that bring it, for `.enabled(if:)`;
    /// empty when nothing is.
    public static func missing(_ names: String...) -> String {
        let absent = names.filter { path($0) == nil }
        guard !absent.isEmpty else { return "" }
        let debian = Set(absent.map { packages[$0] ?? $0 }).sorted()
        return "\(absent.joined(separator: ", ")) not installed (Debian: apt-get install \(debian.joined(separator: " ")); CI installs them): skipped"
    }

    public struct Run: Sendable {
        public var status: Int32
        public var stdout: Data
        public var stderr: String
        public var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Runs `program` with `arguments` to its end.
    public static func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        guard let executable = path(program) else { throw CocoaError(.fileNoSuchFile) }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("out"), err = folder.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        process.environment = merged
        let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
        defer {
            try? outHandle.close()
            try? errHandle.close()
        }
        process.standardOutput = outHandle
        process.standardError = errHandle
        try process.run()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: Data(readAll(out.path)),
            stderr: String(decoding: readAll(err.path), as: UTF8.self))
    }

    /// A file's bytes, read with plain `read` calls (Foundation's file readers leave 4 KiB buffers behind
    /// under the leak checker when they read what a child process wrote: 19 reports in one run).
    public static func readAll(_ path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }
}
