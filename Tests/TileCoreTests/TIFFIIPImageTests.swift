import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore
#if canImport(Glibc)
import Glibc
#endif

/// IIPImage (Debian's `iipimage-server`, a FastCGI program) serves tiles from a TIFF this package
/// wrote, run under spawn-fcgi behind nginx on loopback.
@Suite(
    "IIPImage serves our TIFF",
    .enabled(
        if: Tools.have("spawn-fcgi", "nginx", "/usr/lib/iipimage-server/iipsrv.fcgi"),
        Comment(rawValue: Tools.missing("spawn-fcgi", "nginx", "/usr/lib/iipimage-server/iipsrv.fcgi"))), .ownThreads)
struct TIFFIIPImageTests {
    /// One HTTP/1.0 GET on loopback: the status and the body (nil when nothing answers).
    static func get(port: UInt16, _ target: String) -> (status: Int, body: [UInt8])? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)  // a server that never answers fails the test, no hang
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("GET \(target) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)),
            let statusLine = String(bytes: response[..<split.lowerBound], encoding: .utf8)?.split(separator: " "),
            statusLine.count > 1, let status = Int(statusLine[1])
        else { return nil }
        return (status, Array(response[split.upperBound...]))
    }

    @Test("a DeepZoom-style JTL tile and an IIIF region come back as 256x256 JPEGs")
    func servesTiles() throws {
        let (folder, tiff, image) = try TIFFOutsideReaderTests.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (web, fcgi) = (Tools.freePort(), Tools.freePort())
        let conf = """
            daemon off; pid \(folder)/nginx.pid; error_log \(folder)/nginx.log; worker_processes 1;
            events { worker_connections 16; }
            http { access_log off; client_body_temp_path \(folder)/b; fastcgi_temp_path \(folder)/f;
              proxy_temp_path \(folder)/p; uwsgi_temp_path \(folder)/u; scgi_temp_path \(folder)/s;
              server { listen 127.0.0.1:\(web);
                location /iipsrv { fastcgi_pass 127.0.0.1:\(fcgi); fastcgi_param QUERY_STRING $query_string;
                  fastcgi_param REQUEST_METHOD $request_method; fastcgi_param REQUEST_URI $request_uri;
                  fastcgi_param SERVER_NAME $server_name; fastcgi_param SERVER_PORT $server_port;
                  fastcgi_param SERVER_PROTOCOL $server_protocol; fastcgi_param HTTP_HOST $host; } } }
            """
        try conf.write(toFile: "\(folder)/nginx.conf", atomically: true, encoding: .utf8)
        // nginx stops its workers on SIGTERM; iipsrv waits for its web server and is killed.
        let iip = try Daemon(
            Tools.path("spawn-fcgi")!, ["-n", "-a", "127.0.0.1", "-p", "\(fcgi)", "--", "/usr/lib/iipimage-server/iipsrv.fcgi"],
            environment: ["LOGFILE": "\(folder)/iipsrv.log", "VERBOSITY": "1"])
        defer { iip.stop(SIGKILL) }
        let nginx = try Daemon(Tools.path("nginx")!, ["-c", "\(folder)/nginx.conf"])
        defer { nginx.stop() }
        // Wait (bounded) until both answer: a request for the image's size.
        var info: (status: Int, body: [UInt8])?
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            info = Self.get(port: web, "/iipsrv?FIF=\(tiff)&obj=Max-size&obj=Resolution-number")
            if info?.status == 200 { break }
            usleep(50_000)
        }
        let text = String(decoding: try #require(info).body, as: UTF8.self)
        #expect(text.contains("Max-size:1100 700") && text.contains("Resolution-number:\(image.levelCount)"), "\(text)")
        let tile = try #require(Self.get(port: web, "/iipsrv?FIF=\(tiff)&JTL=\(image.levelCount - 1),0"))
        #expect(tile.status == 200)
        let jtl = try Reference.decode(Data(tile.body)).image
        #expect(jtl.width == 256 && jtl.height == 256)
        let region = try #require(Self.get(port: web, "/iipsrv?IIIF=\(tiff)/0,0,256,256/256,/0/default.jpg"))
        #expect(region.status == 200)
        let decoded = try Reference.decode(Data(region.body)).image
        #expect(decoded.width == 256 && decoded.height == 256)
        let ours = RGBAImage(width: 256, height: 256, pixels: try image.readTile(level: 0, column: 0, row: 0))
        #expect(Reference.psnr(decoded, ours) > 25)  // IIPImage re-encodes the busy picture at its quality 75
    }
}
