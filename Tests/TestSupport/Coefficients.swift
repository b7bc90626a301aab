import CJpegReference
public import Foundation

/// A JPEG's quantized DCT coefficients, read whole by libjpeg's own transcoding API
/// (`jpeg_read_coefficients`): the reference the copied level 0 is held to.
public struct JPEGCoefficients: Sendable {
    public struct Component: Sendable {
        public var h: Int
        public var v: Int
        public var widthInBlocks: Int
        public var heightInBlocks: Int
        /// Blocks of 64 coefficients (natural order), row after row.
        public var blocks: [Int16]
        public var quantisation: [UInt16]

        /// The 64 coefficients of block (x, y).
        public func block(_ x: Int, _ y: Int) -> ArraySlice<Int16> {
            let start = (y * widthInBlocks + x) * 64
            return blocks[start..<(start + 64)]
        }
    }

    public var components: [Component]

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Reads `data` (after `tables`, an abbreviated tables-only stream, when given).
    public init(_ data: Data, tables: Data? = nil) throws {
        var result = cjs_reference_coefficients()
        let status = (tables ?? Data()).withUnsafeBytes { t in
            data.withUnsafeBytes { d in
                cjs_reference_read_coefficients(t.baseAddress, t.count, d.baseAddress, d.count, &result)
            }
        }
        guard status == 0 else {
            let message = withUnsafeBytes(of: result.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw Failure(description: message)
        }
        defer { cjs_reference_free_coefficients(&result) }
        let parts = withUnsafeBytes(of: result.component) { Array($0.bindMemory(to: cjs_reference_component.self)) }
        components = parts.prefix(Int(result.components)).map { c in
            let count = Int(c.width_in_blocks) * Int(c.height_in_blocks) * 64
            return Component(
                h: Int(c.h), v: Int(c.v), widthInBlocks: Int(c.width_in_blocks), heightInBlocks: Int(c.height_in_blocks),
                blocks: Array(UnsafeBufferPointer(start: c.blocks, count: count)),
                quantisation: withUnsafeBytes(of: c.quant) { Array($0.bindMemory(to: UInt16.self)) })
        }
    }
}
