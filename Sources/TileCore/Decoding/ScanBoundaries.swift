/// Finds where each scan of a JPEG stream ends, as the bytes arrive, in any chunks.
///
/// A scan's entropy-coded data ends at the first marker after its SOS segment that is neither a
/// stuffed `FF 00` nor a restart marker (`FF D0`...`FF D7`). The offset of that marker is the scan's
/// end: the stream cut there, with an EOI appended, is the image as of that scan.
struct ScanBoundaries {
    private enum State {
        /// Expecting `FF` then a marker code.
        case marker
        /// Read `FF` (or fill bytes); the next byte is the marker code.
        case markerCode
        /// Reading a segment's 2-byte length (`lengthBytes` read so far).
        case length(isScan: Bool, lengthBytes: Int, high: Int)
        /// Skipping the rest of a segment.
        case segment(isScan: Bool, remaining: Int)
        /// In entropy-coded data; `sawFF` when the last byte was `FF`.
        case entropy(sawFF: Bool)
        /// After EOI, or bytes that are not a JPEG: nothing more to find.
        case done
    }

    private var state = State.marker
    /// Bytes consumed so far.
    private(set) var offset = 0
    /// The end offsets of the scans that have ended, in order.
    private(set) var scanEnds: [Int] = []

    /// Walks `bytes`, the next bytes of the stream.
    mutating func consume(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .done:
                offset += bytes.count - index
                return
            case .marker:
                state = byte == 0xFF ? .markerCode : .done
            case .markerCode:
                take(marker: byte)
            case .length(let isScan, let lengthBytes, let high):
                if lengthBytes == 0 {
                    state = .length(isScan: isScan, lengthBytes: 1, high: Int(byte))
                } else {
                    let length = high << 8 | Int(byte)
                    state = length < 2 ? .done : .segment(isScan: isScan, remaining: length - 2)
                    if length == 2 { state = isScan ? .entropy(sawFF: false) : .marker }
                }
            case .segment(let isScan, let remaining):
                let skip = min(remaining, bytes.count - index)
                index += skip
                let left = remaining - skip
                state = left > 0 ? .segment(isScan: isScan, remaining: left) : (isScan ? .entropy(sawFF: false) : .marker)
                continue
            case .entropy(let sawFF):
                if !sawFF {
                    // Fast path: find the next FF.
                    var next = index
                    while next < bytes.count && bytes[next] != 0xFF { next += 1 }
                    if next == bytes.count {
                        index = next
                        continue
                    }
                    index = next
                    state = .entropy(sawFF: true)
                } else if byte == 0x00 || (0xD0...0xD7).contains(byte) {
                    state = .entropy(sawFF: false)
                } else if byte != 0xFF {
                    scanEnds.append(offset + index - 1)
                    take(marker: byte)
                }
            }
            index += 1
        }
        offset += bytes.count
    }

    private mutating func take(marker: UInt8) {
        switch marker {
        case 0xFF: state = .markerCode  // fill byte
        case 0xD8, 0x01, 0xD0...0xD7: state = .marker  // no length
        case 0xD9: state = .done  // EOI
        default: state = .length(isScan: marker == 0xDA, lengthBytes: 0, high: 0)
        }
    }
}
