public import Foundation

/// Small inputs that declare or cause far more work than their bytes justify (issue 37): made here so
/// that the tests and the benchmarks' `serve-attack` scenario measure the same files.
public enum Bombs {
    /// A one-tile, one-component, 8-bit codestream of `width` x `height`, reversible 5/3, `levels`
    /// decomposition levels, code-blocks of 2^(xcb+2) x 2^(ycb+2), precincts of 2^pp x 2^pp at every
    /// resolution when `precinct` is given (else the default, 2^15), a COC for component 0 with
    /// code-blocks of 2^(coc+2) when `coc` is given, one quality layer, every packet empty (a 0 bit,
    /// padded to a byte): every coefficient is zero.
    public static func emptyJPEG2000(
        width: UInt32, height: UInt32, levels: UInt8 = 5, xcb: UInt8 = 0, ycb: UInt8 = 0, precinct: UInt8? = nil, coc: UInt8? = nil
    ) -> [UInt8] {
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var out: [UInt8] = [0xFF, 0x4F]  // SOC
        // SIZ: Lsiz 38 + 3 a component, Rsiz 0, Xsiz, Ysiz, XOsiz, YOsiz, XTsiz, YTsiz, XTOsiz, YTOsiz,
        // Csiz 1, then Ssiz 7 (8-bit unsigned), XRsiz 1, YRsiz 1.
        out += [0xFF, 0x51] + be16(41) + be16(0) + be32(width) + be32(height) + be32(0) + be32(0)
        out += be32(width) + be32(height) + be32(0) + be32(0) + be16(1) + [7, 1, 1]
        // COD: Lcod, Scod (bit 0: precincts given), LRCP, 1 layer, no MCT, levels, xcb, ycb, style 0,
        // transform 1 (5/3 reversible), then a PPx | PPy << 4 byte a resolution.
        let precincts = precinct.map { [UInt8](repeating: $0 | $0 << 4, count: Int(levels) + 1) } ?? []
        out += [0xFF, 0x52] + be16(12 + precincts.count) + [precinct == nil ? 0 : 1, 0] + be16(1) + [0, levels, xcb, ycb, 0, 1] + precincts
        // COC (A.6.2): Lcoc 9, Ccoc 0 (one byte: fewer than 257 components), Scoc 0, levels, xcb, ycb, style, transform.
        if let coc { out += [0xFF, 0x53] + be16(9) + [0, 0, levels, coc, coc, 0, 1] }
        // QCD: Sqcd 0x40 (2 guard bits, no quantisation), an exponent a subband (LL 8, HL and LH 9, HH 10).
        let subbands = [8] + (0..<Int(levels)).flatMap { _ in [9, 9, 10] }
        out += [0xFF, 0x5C] + be16(3 + subbands.count) + [0x40] + subbands.map { UInt8($0 << 3) }
        // One empty packet a precinct of each resolution (B.6: resolution r is ceil(size / 2^(levels - r))
        // on each side, cut into precincts of 2^pp).
        var packetCount = 0
        for r in 0...Int(levels) {
            let scale = 1 << (Int(levels) - r), side = 1 << Int(precinct ?? 15)
            let (w, h) = ((Int(width) + scale - 1) / scale, (Int(height) + scale - 1) / scale)
            packetCount += ((w + side - 1) / side) * ((h + side - 1) / side)
        }
        let packets = [UInt8](repeating: 0, count: packetCount)
        // SOT: Lsot 10, Isot 0, Psot (this tile-part's bytes from SOT), TPsot 0, TNsot 1; then SOD.
        out += [0xFF, 0x90] + be16(10) + be16(0) + be32(UInt32(12 + 2 + packets.count)) + [0, 1]
        out += [0xFF, 0x93] + packets
        out += [0xFF, 0xD9]  // EOC
        return out
    }

    /// A `cjpeg -scans` script of 100 scans (cjpeg's limit) for one component: successive approximation
    /// of the DC and of AC 1 to 8, bit by bit (11 scans each, libjpeg's 10 bits at most), then AC 9-63
    /// at once. Valid, and 10 to 25 times the passes over the blocks that real encoders make.
    public static let hundredScans: String = {
        var script = ["0: 0-0, 0, 10;"] + (0...9).reversed().map { "0: 0-0, \($0 + 1), \($0);" }
        for k in 1...8 { script += ["0: \(k)-\(k), 0, 10;"] + (0...9).reversed().map { "0: \(k)-\(k), \($0 + 1), \($0);" } }
        script.append("0: 9-63, 0, 0;")
        return script.joined(separator: "\n")
    }()

    /// A binary PGM (`P5`) of `side` x `side` zeros, the picture the scan bomb codes.
    public static func blackPGM(side: Int) -> Data { Data("P5\n\(side) \(side)\n255\n".utf8) + Data(count: side * side) }

    /// A little-endian TIFF of one directory: `entries` as (tag, type, values) with type 3 SHORT or 4
    /// LONG, then `strips` (or tiles), whose offsets and byte counts the writer adds (tags 273 and 279,
    /// or 324 and 325); `pointers` (strip or tile, index in `strips`) when several share bytes.
    public static func tiff(
        _ entries: [(tag: UInt16, type: UInt16, values: [UInt32])], strips: [[UInt8]], tiled: Bool = false, pointers: [Int]? = nil
    ) -> [UInt8] {
        func le(_ value: UInt32, _ bytes: Int) -> [UInt8] { (0..<bytes).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        var data: [UInt8] = []  // the strips (arrays too long for their entries go after the directory)
        var offsets: [UInt32] = []
        for strip in strips {
            offsets.append(UInt32(8 + data.count))
            data += strip
        }
        let order = pointers ?? Array(strips.indices)
        let located: [(tag: UInt16, type: UInt16, values: [UInt32])] = [
            (tiled ? 324 : 273, 4, order.map { offsets[$0] }), (tiled ? 325 : 279, 4, order.map { UInt32(strips[$0].count) })
        ]
        let all = (entries + located).sorted { $0.tag < $1.tag }
        let directory = 8 + data.count + data.count % 2
        if data.count % 2 == 1 { data.append(0) }
        var arrays: [UInt8] = []
        let arraysAt = directory + 2 + 12 * all.count + 4
        var body: [UInt8] = le(UInt32(all.count), 2)
        for entry in all {
            let size = entry.type == 3 ? 2 : 4
            let bytes = entry.values.flatMap { le($0, size) }
            body += le(UInt32(entry.tag), 2) + le(UInt32(entry.type), 2) + le(UInt32(entry.values.count), 4)
            if bytes.count <= 4 {
                body += bytes + [UInt8](repeating: 0, count: 4 - bytes.count)
            } else {
                body += le(UInt32(arraysAt + arrays.count), 4)
                arrays += bytes
            }
        }
        return [0x49, 0x49, 42, 0] + le(UInt32(directory), 4) + data + body + le(0, 4) + arrays
    }
}
