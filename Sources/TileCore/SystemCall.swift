#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one place TileCore turns failed system calls into ``TileError``s.
enum SystemCall {
    static var lastErrno: Int32 { errno }

    static func describe(_ number: Int32) -> String { String(cString: strerror(number)) }

    static func error(_ operation: String, path: String?, errno number: Int32 = errno) -> TileError {
        let subject = path.map { " \($0)" } ?? ""
        return TileError(.io, "\(operation)\(subject): \(describe(number))", errno: number)
    }

    /// Retries a call interrupted by a signal.
    static func retrying<T: BinaryInteger>(_ body: () -> T) -> T {
        while true {
            let result = body()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}
