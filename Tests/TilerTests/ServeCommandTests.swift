import Foundation
import Testing
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `tiler serve` as a user runs it: the built binary in a child process, asked over loopback with plain
/// HTTP/1.1, stopped with SIGTERM while an upload is still arriving.
@Suite("tiler serve on the command line", .serialized)
struct ServeCommandTests {
    /// A running `tiler serve`: its process, the port it printed, and its standard error so far.
    final class Server {
        let process = Process()
        let errors = Pipe()
        private(set) var port = 0

        /// - Parameter descriptors: a limit on the process's descriptors (`ulimit -n`, soft and hard), if any.
        init(_ arguments: [String], descriptors: Int? = nil) throws {
            if let descriptors {  // the shell sets the limit, then becomes tiler (the same process)
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(descriptors) && exec \"$0\" serve \"$@\"", TilerCommandTests.binary] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: TilerCommandTests.binary)
                process.arguments = ["serve"] + arguments
            }
            var environment = ProcessInfo.processInfo.environment
            environment["ASAN_OPTIONS"] = "detect_leaks=0"
            process.environment = environment
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            // "tiler: serving FOLDER at http://127.0.0.1:PORT/iiif/3/ and /dzi/", within 60 s.
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while port == 0, Date() < deadline {
                let data = errors.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
                if let range = text.range(of: "at http://127.0.0.1:") {
                    port = Int(text[range.upperBound...].prefix { $0.isNumber }) ?? 0
                }
            }
            guard port > 0 else { throw TileError(.io, "tiler serve did not say where it listens: \(text)") }
        }

        /// What the server has written to standard error since it said where it listens, up to now.
        func errorsSoFar() -> String {
            let fd = errors.fileHandleForReading.fileDescriptor
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var text = Data(), buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { break }
                text.append(contentsOf: buffer[0..<n])
            }
            return String(decoding: text, as: UTF8.self)
        }

        /// Sends SIGTERM and waits (at most `seconds`) for the exit.
        func terminate(within seconds: Double) -> (status: Int32, signalled: Bool)? {
            process.terminate()
            let deadline = Date().addingTimeInterval(seconds)
            while process.isRunning, Date() < deadline { usleep(50_000) }
            guard !process.isRunning else {
                kill(process.processIdentifier, SIGKILL)
                return nil
            }
            return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
        }
    }

    /// One HTTP/1.1 exchange on a connection of its own (`Connection: close`): status, headers, body.
    static func request(_ port: Int, _ method: String, _ path: String) throws -> (status: Int, headers: [String: String], body: Data) {
        let connection = try LoopbackConnection(port: UInt16(port))
        try connection.send(Data("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
        let reply = connection.read(timeout: .seconds(60)).bytes
        guard let split = reply.range(of: Data("\r\n\r\n".utf8)) else { throw TileError(.io, "no HTTP reply to \(path)") }
        let lines = String(decoding: reply[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, Data(reply[split.upperBound...]))
    }

    @Test("serves IIIF, DeepZoom and the pages; SIGTERM mid-upload exits 0 and leaves no unfinished files")
    func serveAndStop() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let photo = try DemoImage.jpeg(width: 1200, height: 800)
        try photo.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let server = try Server([folder, "--port", "0", "--allow-uploads", "--upload-token", "t", "--idle-timeout", "2"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let port = server.port

        let info = try Self.request(port, "GET", "/iiif/3/photo/info.json")
        #expect(info.status == 200 && info.headers["content-type"]?.hasPrefix("application/ld+json") == true)
        let json = try JSONSerialization.jsonObject(with: info.body) as? [String: Any]
        #expect(json?["width"] as? Int == 1200 && json?["height"] as? Int == 800)
        // A tile twice (rendered, then from the cache): libjpeg's decode of the source, within JPEG's error.
        let reference = try Reference.decode(photo).image
        for _ in 0..<2 {
            let tile = try Self.request(port, "GET", "/dzi/photo_files/11/1_1.jpg")
            #expect(tile.status == 200 && tile.headers["content-type"] == "image/jpeg")
            let decoded = try Reference.decode(tile.body).image
            #expect(decoded.width == 256 && decoded.height == 256)
            #expect(Reference.psnr(decoded, Reference.crop(reference, x: 256, y: 256, width: 256, height: 256)) >= 30)
        }
        let listing = try Self.request(port, "GET", "/")
        #expect(listing.status == 200 && String(decoding: listing.body, as: UTF8.self).contains(">photo</a>"))
        #expect(try Self.request(port, "GET", "/view/photo").status == 200)
        #expect(try Self.request(port, "GET", "/iiif/3/..%2Fetc/info.json").status == 400)

        // An upload that stops half-way: being built when SIGTERM arrives.
        let upload = try LoopbackConnection(port: UInt16(port))
        let head = "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(photo.count)\r\n\r\n"
        try upload.send(Data(head.utf8) + photo.prefix(photo.count / 2))
        // Its state: building, every byte sent so far taken in, of the announced length.
        var state = ""
        let received = "\"bytesReceived\":\(photo.count / 2)"
        for _ in 0..<200 where !(state.contains("\"building\"") && state.contains(received)) {
            state = String(decoding: try Self.request(port, "GET", "/images/up").body, as: UTF8.self)
            usleep(20_000)
        }
        #expect(state.contains("\"building\"") && state.contains(received) && state.contains("\"rowsDecoded\":"), "\(state)")
        let ended = server.terminate(within: 30)
        #expect(ended?.status == 0 && ended?.signalled == false, "\(String(describing: ended))")
        // Left: the source, and the complete store of photo in the cache (with the record of which
        // version of photo.jpg it was built from); nothing of the upload.
        let left = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(left == [".tiler-cache", "base.jpg", "p.jpg", "photo.jpg"], "\(left)")
        let cached = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.tiler-cache").sorted()
        #expect(cached == ["photo.source", "photo.tiles"], "\(cached)")
        #expect(try TiledImage.open(store: "\(folder)/.tiler-cache/photo.tiles").isComplete)
    }

    /// `VmRSS` or `VmHWM` of a process, in MiB.
    static func memory(_ pid: Int32, _ field: String) -> Double {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan) / 1024
    }

    @Test("a client pipelining 10,000 tile and region requests without reading the answers grows the server by less than 32 MiB; others are served meanwhile")
    func pipelinedWithoutReading() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/big.tiles")
        let jpeg = try DemoImage.jpeg(width: 4096, height: 3072)
        _ = try TileBuilder.build(data: jpeg, options: options)
        let server = try Server([folder, "--port", "0", "--idle-timeout", "30"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let (port, pid) = (server.port, server.process.processIdentifier)
        // Warm: the cached tile, a render, the pages.
        #expect(try Self.request(port, "GET", "/dzi/big_files/12/0_0.jpg").status == 200)
        #expect(try Self.request(port, "GET", "/iiif/3/big/512,512,512,512/max/0/default.jpg").status == 200)
        let before = Self.memory(pid, "VmRSS")
        // 10,000 requests: a cached tile, tiles not encoded yet, 512-pixel regions not rendered yet.
        var requests = ""
        for i in 0..<10_000 {
            let path: String
            switch i % 3 {
            case 0: path = "/dzi/big_files/12/0_0.jpg"
            case 1: path = "/dzi/big_files/12/\(i / 3 % 16)_\(i / 48 % 12).jpg"
            default: path = "/iiif/3/big/\(i % 7 * 256),\(i % 5 * 256),512,512/max/0/default.jpg"
            }
            requests += "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        }
        let attacker = try LoopbackConnection(port: UInt16(port))
        let payload = Data(requests.utf8)
        let sending = Thread { try? attacker.send(payload) }  // blocks once the server stops reading
        sending.start()
        usleep(3_000_000)
        // Others are served meanwhile.
        #expect(try Self.request(port, "GET", "/iiif/3/big/info.json").status == 200)
        #expect(try Self.request(port, "GET", "/dzi/big_files/11/1_1.jpg").status == 200)
        usleep(2_000_000)
        let (after, peak) = (Self.memory(pid, "VmRSS"), Self.memory(pid, "VmHWM"))
        #expect(peak - before < 32, "RSS \(before) MiB before, \(after) after, peak \(peak)")
        FileHandle.standardError.write(Data("pipelined without reading: RSS \(before) -> \(after) MiB, peak \(peak) MiB\n".utf8))
        attacker.shutDown()
        #expect(server.terminate(within: 30)?.status == 0)
    }
}
