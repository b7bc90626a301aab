public import Foundation
import TileCore

/// ICC profiles for tests: made plainly here, carried by JPEGs that libjpeg writes, and read back from
/// outputs by outside tools (`djpeg -icc`, `vipsheader -f icc-profile-data`).
public enum ICCProfiles {
    /// An ICC profile of `space` ("RGB " or "GRAY"): the 128-byte header (size, version 2.1, display
    /// class, XYZ connection space, D50, the `acsp` signature) and no tags, then `padding` bytes.
    public static func profile(space: String = "RGB ", padding: Int = 400) -> [UInt8] {
        let count = 132 + padding
        var bytes = [UInt8](repeating: 0, count: count)
        func put(_ text: String, at offset: Int) { for (i, c) in text.utf8.enumerated() { bytes[offset + i] = c } }
        func put32(_ value: UInt32, at offset: Int) { for i in 0..<4 { bytes[offset + i] = UInt8(value >> (24 - 8 * i) & 0xFF) } }
        put32(UInt32(count), at: 0)
        put32(0x0210_0000, at: 8)
        put("mntr", at: 12)
        put(space, at: 16)
        put("XYZ ", at: 20)
        put("acsp", at: 36)
        put32(0x0000_F6D6, at: 68)  // D50: X 0.9642, Y 1.0, Z 0.8249 (s15Fixed16)
        put32(0x0001_0000, at: 72)
        put32(0x0000_D32D, at: 76)
        for i in 0..<padding { bytes[132 + i] = UInt8(i % 251) }
        return bytes
    }

    /// A JPEG of `width` x `height` carrying `profile`, written by libjpeg (`jpeg_write_icc_profile`).
    public static func jpeg(width: Int, height: Int, gray: Bool = false, profile: [UInt8]) throws -> Data {
        var pixels = Synthetic.pixels(width: width, height: height)
        if gray { pixels = stride(from: 0, to: pixels.count, by: 4).map { pixels[$0] } }
        let encoder = try JPEGEncoder(width: width, height: height, input: gray ? .grayscale : .rgba, options: JPEGEncoder.Options())
        try encoder.writeICCProfile(profile)
        try pixels.withUnsafeBytes { try encoder.writeRows($0, stride: width * (gray ? 1 : 4), count: height) }
        return try encoder.finish()
    }

    public static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("icc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The profile djpeg reads from a JPEG (nil when it has none), and whether djpeg decodes it.
    public static func djpeg(_ jpeg: some DataProtocol) throws -> (profile: [UInt8]?, decodes: Bool) {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data(jpeg).write(to: URL(fileURLWithPath: "\(folder)/in.jpg"))
        let run = try Tools.run("djpeg", ["-icc", "\(folder)/out.icc", "-outfile", "\(folder)/out.ppm", "\(folder)/in.jpg"])
        let profile = Tools.readAll("\(folder)/out.icc")
        return (profile.isEmpty ? nil : profile, run.status == 0 && !run.stderr.contains("Corrupt"))
    }

    /// The profile vips reads from a file (a PNG's iCCP, a TIFF's InterColorProfile), nil when none.
    public static func vips(file: String) throws -> [UInt8]? {
        let run = try Tools.run("vipsheader", ["-f", "icc-profile-data", file])
        guard run.status == 0 else { return nil }
        let text = run.text.trimmingCharacters(in: .whitespacesAndNewlines)
        return Data(base64Encoded: text).map { [UInt8]($0) }
    }

    public static func vips(_ data: Data, suffix: String) throws -> [UInt8]? {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try data.write(to: URL(fileURLWithPath: "\(folder)/file.\(suffix)"))
        return try vips(file: "\(folder)/file.\(suffix)")
    }
}
