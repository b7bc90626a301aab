internal import CSpool
import Foundation

/// The master decoders' one status convention (`cmaster_status`, shared by the PNG, TIFF and
/// JPEG 2000 decoders in C) turned into Swift in one place: a step of the decode, or a ``TileError``.
enum MasterStatus {
    /// The step `status` says, or the error it is.
    /// - Parameters:
    ///   - format: the format's name in the error's text ("PNG", "TIFF", "JPEG 2000").
    ///   - message: the decoder's text of the failure, asked only when there is one.
    ///   - errorNumber: the decoder's errno of an I/O failure, asked only then (0: `EIO`).
    /// - Throws: ``TileError``: `.corrupt` for data the library refused, `.truncated`, `.unsupported`,
    ///   `.io` (with the errno; `ENOMEM` when out of memory), `.invalidArgument` for a bad argument or
    ///   a call out of order.
    static func step(
        _ status: cmaster_status, format: String, message: () -> String, errorNumber: () -> Int32 = { 0 }
    ) throws(TileError) -> DecodeStep {
        switch status {
        case CMASTER_OK: return .ready
        case CMASTER_NEED_DATA: return .needData
        case CMASTER_DONE: return .done
        case CMASTER_ERR_CORRUPT: throw TileError(.corrupt, "the \(format) data cannot be read: \(message())")
        case CMASTER_ERR_NOMEM: throw TileError(.io, "out of memory decoding the \(format)", errno: ENOMEM)
        case CMASTER_ERR_UNSUPPORTED: throw TileError(.unsupported, message())
        case CMASTER_ERR_TRUNCATED: throw TileError(.truncated, message())
        case CMASTER_ERR_ARGUMENT:
            let text = message()
            throw TileError(.invalidArgument, text.isEmpty ? "the \(format) decoder was given a bad argument" : text)
        case CMASTER_ERR_IO:
            let number = errorNumber()
            throw TileError(.io, message(), errno: number == 0 ? EIO : number)
        default: throw TileError(.invalidArgument, "the \(format) decoder was called in the wrong state")
        }
    }

    /// Throws the error `status` is, if it is one.
    static func check(
        _ status: cmaster_status, format: String, message: () -> String, errorNumber: () -> Int32 = { 0 }
    ) throws(TileError) {
        _ = try step(status, format: format, message: message, errorNumber: errorNumber)
    }
}
