public import Foundation

/// The outside decoders of WebP and AVIF (`dwebp` from Debian's `webp`, `avifdec` from
/// `libavif-bin`): what a file decodes to, for tests of the encoders, with nothing of ours in between.
public enum WebDecoders {
    /// Why the decoders are absent (a skip message), or empty when both are installed.
    public static var missing: String { Tools.missing("dwebp", "webpmux", "avifdec") }
    public static var installed: Bool { Tools.have("dwebp", "webpmux", "avifdec") }

    /// `dwebp`'s decode of a WebP, as RGBA (its PAM output: alpha 255 where the file has none).
    public static func webp(_ data: Data) throws -> RGBAImage {
        try withFiles(data, input: "in.webp", output: "out.pam") { input, output in
            try check(Tools.run("dwebp", [input, "-pam", "-o", output]), "dwebp")
            return try pam(Data(contentsOf: URL(fileURLWithPath: output)))
        }
    }

    /// `avifdec`'s decode of an AVIF to an 8-bit PNG, read by libpng, as RGBA.
    public static func avif(_ data: Data) throws -> RGBAImage {
        try withFiles(data, input: "in.avif", output: "out.png") { input, output in
            try check(Tools.run("avifdec", ["--depth", "8", input, output]), "avifdec")
            return try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: output)))
        }
    }

    /// What `webpmux -info` says of a WebP (its features: `alpha`, `ICC profile`; "No features present."
    /// for a plain lossy or lossless file).
    public static func webpInfo(_ data: Data) throws -> String {
        try withFiles(data, input: "in.webp", output: "unused") { input, _ in
            let run = try Tools.run("webpmux", ["-info", input])
            try check(run, "webpmux -info")
            return run.text
        }
    }

    /// The colour profile `webpmux -get icc` finds in a WebP, or nil when it has none.
    public static func webpProfile(_ data: Data) throws -> [UInt8]? {
        try withFiles(data, input: "in.webp", output: "out.icc") { input, output in
            let run = try Tools.run("webpmux", ["-get", "icc", input, "-o", output])
            return run.status == 0 ? FileManager.default.contents(atPath: output).map { [UInt8]($0) } : nil
        }
    }

    /// What `avifdec --info` says of an AVIF (its colour profile's size, its format).
    public static func avifInfo(_ data: Data) throws -> String {
        try withFiles(data, input: "in.avif", output: "unused") { input, _ in
            let run = try Tools.run("avifdec", ["--info", input])
            try check(run, "avifdec --info")
            return run.text
        }
    }

    private static func withFiles<T>(_ data: Data, input: String, output: String, _ body: (String, String) throws -> T) throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webdecode-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try data.write(to: URL(fileURLWithPath: "\(folder)/\(input)"))
        return try body("\(folder)/\(input)", "\(folder)/\(output)")
    }

    private static func check(_ run: Tools.Run, _ name: String) throws {
        guard run.status == 0 else { throw Reference.DecodeFailure(message: "\(name) failed (\(run.status)): \(run.stderr)") }
    }

    /// A PAM (`P7`, 8 bits, depth 3 or 4) as RGBA.
    static func pam(_ data: Data) throws -> RGBAImage {
        let bytes = [UInt8](data)
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: Array("ENDHDR\n".utf8)) }) else {
            throw Reference.DecodeFailure(message: "not a PAM")
        }
        var fields: [String: Int] = [:]
        for line in String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Int(parts[1]) { fields[String(parts[0])] = value }
        }
        guard let width = fields["WIDTH"], let height = fields["HEIGHT"], let depth = fields["DEPTH"], fields["MAXVAL"] == 255,
            depth == 3 || depth == 4
        else { throw Reference.DecodeFailure(message: "a PAM this reader does not take: \(fields)") }
        let body = bytes[(end + 7)...]
        guard body.count >= width * height * depth else { throw Reference.DecodeFailure(message: "a cut PAM") }
        var pixels = [UInt8]()
        pixels.reserveCapacity(width * height * 4)
        var i = body.startIndex
        for _ in 0..<(width * height) {
            pixels += body[i..<(i + 3)]
            pixels.append(depth == 4 ? body[i + 3] : 255)
            i += depth
        }
        return RGBAImage(width: width, height: height, pixels: pixels)
    }
}
