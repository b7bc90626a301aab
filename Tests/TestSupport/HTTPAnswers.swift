public import Foundation

/// HTTP/1.1 answers read back from raw bytes, framed by their `Content-Length` (tests that write
/// requests by hand on plain sockets).
public enum HTTPAnswers {
    public typealias Answer = (status: Int, headers: [String: String], body: Data)

    /// The whole answers in `data` (an interim `100 Continue` is one; no body for 1xx, 204, 304, nor
    /// for the answers whose index `isHead` says answer a HEAD).
    public static func split(_ data: Data, isHead: (Int) -> Bool = { _ in false }) -> [Answer] {
        var rest = data[...]
        var out: [Answer] = []
        while let end = rest.range(of: Data("\r\n\r\n".utf8)) {
            let lines = String(decoding: rest[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? 0
            let noBody = (100..<200).contains(status) || status == 204 || status == 304 || isHead(out.filter { $0.status >= 200 }.count)
            let length = noBody ? 0 : Int(headers["content-length"] ?? "0") ?? 0
            guard rest.distance(from: end.upperBound, to: rest.endIndex) >= length else { break }
            let bodyEnd = rest.index(end.upperBound, offsetBy: length)
            out.append((status, headers, Data(rest[end.upperBound..<bodyEnd])))
            rest = rest[bodyEnd...]
        }
        return out
    }

    /// Reads from `connection` until `count` final answers (with `interim`, any answers: a `100 Continue`
    /// counts) have arrived (and `grace` more passed without another), the peer closes, or `timeout` passes.
    @available(*, noasync, message: "blocks a thread of Swift's cooperative pool, which an in-process server needs: use received")
    public static func read(
        _ connection: LoopbackConnection, count: Int, interim: Bool = false, timeout: Duration, grace: Duration = .milliseconds(30),
        isHead: (Int) -> Bool = { _ in false }
    ) -> (answers: [Answer], closed: Bool) {
        var data = Data()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            func isEnough(_ bytes: Data) -> Bool { split(bytes, isHead: isHead).filter { interim || $0.status >= 200 }.count >= count }
            let enough = isEnough(data)
            // Until the answers expected have come (then `grace`, for any that should not come).
            let (more, closed) = connection.read(timeout: enough ? grace : .milliseconds(100), until: { enough ? false : isEnough(data + $0) })
            data += more
            if closed || (enough && more.isEmpty) { return (split(data, isHead: isHead), closed) }
        }
        return (split(data, isHead: isHead), false)
    }

    /// As ``read(_:count:interim:timeout:grace:isHead:)``, on a thread of its own (``LoopbackConnection/onOwnThread(_:)``).
    public static func received(
        _ connection: LoopbackConnection, count: Int, interim: Bool = false, timeout: Duration, grace: Duration = .milliseconds(30),
        isHead: @escaping @Sendable (Int) -> Bool = { _ in false }
    ) async -> (answers: [Answer], closed: Bool) {
        await LoopbackConnection.onOwnThread { read(connection, count: count, interim: interim, timeout: timeout, grace: grace, isHead: isHead) }
    }
}

/// SplitMix64: a fixed, seedable sequence for tests that must replay.
public struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
