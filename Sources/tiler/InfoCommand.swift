import ArgumentParser
import Foundation
import NIOCore
import TileCore
import TileNetwork

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract:
            "Print a master's properties (JPEG, PNG, TIFF), read from its header without decoding; or a store's or tiled pyramidal TIFF's levels, tile coding and size on disk."
    )

    @Argument(
        help:
            "A JPEG, PNG or TIFF master (- for standard input, s3://BUCKET/KEY for an object in a store, named as tiler build reads it), a store folder, or a tiled pyramidal TIFF (.tif)."
    )
    var input: String

    @Flag(help: "Print JSON with stable keys.")
    var json = false

    func run() async throws {
        if input.hasPrefix("s3://") {
            let info: ImageInfo
            do { info = try await Self.objectInfo(input) } catch { throw fail(input, error) }
            if json { print(try infoJSON(info)) } else { printInfo(info) }
            return
        }
        if input != "-" && (isDirectory(input) || isTIFFFile(input)) {
            do {
                try printStore()
                return
            } catch let error as TileError where isTIFFFile(input) && [.invalidStore, .unsupported].contains(error.code) {
                // Not a tiled pyramid this package serves: a TIFF master, described from its directory.
            } catch { throw fail(input, error) }
        }
        do {
            let info = try ImageInfo.read(contentsOfFile: input)
            if json {
                print(try infoJSON(info))
            } else {
                printInfo(info)
            }
        } catch {
            throw fail(input, error)
        }
    }

    /// A store's or TIFF's levels, their tile coding, and the bytes on disk.
    private func printStore() throws {
        let description = try StoreDescription.read(at: input)
        let image = isDirectory(input) ? try TiledImage.open(store: input) : try TiledImage.open(tiff: input)
        let g = image.geometry
        let kind = isDirectory(input) ? "\(description.format) store" : "tiled TIFF"
        var lines = ["\(escapingControlCharacters(input)): \(kind), \(g.width)x\(g.height), \(image.levelCount) levels, \(g.tileSize)px tiles"]
        if let levelZero = description.levelZero {
            lines.append(
                "level 0: \(levelZero)\(description.levelZeroReason.map { " (\($0))" } ?? "")\(description.quality.map { ", lower levels at JPEG quality \($0)" } ?? "")\(description.tables.map { " (\($0 == .annexK ? "Annex K" : "flattened") tables)" } ?? "")\(description.webp.map { ", every level WebP \($0.lossless ? "lossless" : "at quality \($0.quality)")" } ?? "")"
            )
        }
        for index in 0..<image.levelCount {
            let l = g.levels[index]
            lines.append(
                "  level \(index): \(l.width)x\(l.height), \(l.columns)x\(l.rows) tiles, \(image.tileCoding(ofLevel: index).map { "\($0)" } ?? "")")
        }
        let megabytes = Double(description.byteCount) / 1e6
        var size = String(format: "size on disk: %d bytes (%.1f MB)", description.byteCount, megabytes)
        if let source = description.sourceByteCount, source > 0 {
            size += String(format: ", %.2fx the source's %d bytes", Double(description.byteCount) / Double(source), source)
        }
        lines.append(size)
        print(lines.joined(separator: "\n"))
    }

    private func printInfo(_ info: ImageInfo) {
        let name = escapingControlCharacters(input == "-" ? "stdin" : input)
        let alpha = info.hasAlpha ? " + alpha" : ""
        print(
            "\(name): \(info.format.rawValue.uppercased()), \(info.width)x\(info.height), \(info.components) components\(alpha), \(info.colorSpace.rawValue), \(info.bitsPerSample)-bit"
        )
        if let tiff = info.tiff {
            let layout = tiff.isTiled ? "tiles" : "strips"
            let planes = tiff.isPlanar ? ", separate planes" : ""
            let order = tiff.isBigEndian ? "big-endian" : "little-endian"
            print(
                "TIFF: \(tiff.compressionName), photometric \(tiff.photometric), \(tiff.samplesPerPixel) samples a pixel, \(layout)\(planes), \(order)\(tiff.isBigTIFF ? " BigTIFF" : ""), \(tiff.pageCount) page\(tiff.pageCount == 1 ? "" : "s")\(tiff.alphaIsAssociated ? ", associated alpha" : "")"
            )
        } else if let j = info.jpeg2000 {
            let tiles = j.tileCount == 1 ? "one tile" : "\(j.tileCount) tiles of \(j.tileWidth)x\(j.tileHeight)"
            let coder = j.isHighThroughput ? " (HTJ2K)" : ""
            print("JPEG 2000: \(j.isCodestream ? "J2K codestream" : "JP2 file")\(coder), \(tiles), \(j.resolutionLevels) resolution levels")
        } else if info.format == .jpeg {
            print(
                "coding: \(info.coding.rawValue)\(info.isArithmetic ? ", arithmetic" : ""), subsampling \(info.subsampling), restart interval \(info.restartInterval)"
            )
        }
        print("orientation: \(info.exifOrientation.map(String.init) ?? "none") -> displayed \(info.orientedWidth)x\(info.orientedHeight)")
        if let icc = info.iccProfile {
            let space =
                info.colorProfile.map { ", \($0.colorSpace == .other ? "other colour space" : $0.colorSpace.rawValue)" } ?? ", not a valid profile"
            print("ICC profile: \(icc.count) bytes\(space)")
        }
        if let gamma = info.gamma { print(String(format: "gamma (gAMA): %.5f", gamma)) }
        if let intent = info.sRGBIntent { print("sRGB, rendering intent \(intent)") }
        if let adobe = info.adobeTransform { print("Adobe transform: \(adobe)") }
        if let d = info.density { print("density: \(d.x)x\(d.y) (unit \(d.unit))") }
        if let problem = info.exifProblem { print("EXIF: unreadable in part: \(problem)") }
        for key in info.exif.keys.sorted() { print(escapingControlCharacters("  \(key): \(info.exif[key]!)")) }
        if let geometry = try? TileGeometry(
            storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
        {
            print("levels: " + geometry.levels.map { "\($0.width)x\($0.height)" }.joined(separator: ", "))
        }
    }
}

/// The JSON of `tiler info --json`: stable keys for scripts.
func infoJSON(_ info: ImageInfo) throws -> String {
    var exif: [String: Any] = [:]
    for (key, value) in info.exif {
        switch value {
        case .string(let s): exif[key] = s
        case .integers(let v): exif[key] = v.count == 1 ? v[0] : v
        case .rationals(let v): exif[key] = v.count == 1 ? v[0].description : v.map(\.description)
        case .bytes(let v): exif[key] = v.count <= 64 ? v.map(Int.init) : "\(v.count) bytes"
        }
    }
    var object: [String: Any] = [
        "width": info.width, "height": info.height, "orientation": info.exifOrientation ?? 1,
        "orientedWidth": info.orientedWidth, "orientedHeight": info.orientedHeight,
        "components": info.components, "colorSpace": info.colorSpace.rawValue, "bitsPerSample": info.bitsPerSample,
        "progressive": info.isProgressive, "arithmetic": info.isArithmetic, "coding": info.coding.rawValue,
        "subsampling": info.subsampling, "restartInterval": info.restartInterval,
        "iccProfileBytes": info.iccProfile?.count ?? 0, "exif": exif
    ]
    object["format"] = info.format.rawValue
    if let gamma = info.gamma { object["gamma"] = gamma }
    if let intent = info.sRGBIntent { object["sRGBIntent"] = intent }
    object["alpha"] = info.hasAlpha
    if let tiff = info.tiff {
        object["tiff"] = [
            "compression": tiff.compression, "compressionName": tiff.compressionName, "photometric": tiff.photometric,
            "samplesPerPixel": tiff.samplesPerPixel, "tiled": tiff.isTiled, "planar": tiff.isPlanar, "bigTIFF": tiff.isBigTIFF,
            "bigEndian": tiff.isBigEndian, "associatedAlpha": tiff.alphaIsAssociated, "pages": tiff.pageCount
        ]
    }
    if let j = info.jpeg2000 {
        object["jpeg2000"] = [
            "codestream": j.isCodestream, "highThroughput": j.isHighThroughput, "tileWidth": j.tileWidth, "tileHeight": j.tileHeight,
            "tiles": j.tileCount,
            "resolutionLevels": j.resolutionLevels
        ]
    }
    if let adobe = info.adobeTransform { object["adobeTransform"] = adobe }
    if let problem = info.exifProblem { object["exifProblem"] = problem }
    if let d = info.density { object["density"] = ["unit": d.unit, "x": d.x, "y": d.y] }
    let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    return String(decoding: data, as: UTF8.self)
}

extension InfoCommand {
    /// The header of the object `url` names (`s3://BUCKET/KEY`, the store the environment names), read
    /// from its first bytes: 64 KiB, then 1 MiB, then 16 MiB while the header goes on (a TIFF whose
    /// directory is further on is reported truncated).
    static func objectInfo(_ url: String) async throws -> ImageInfo {
        guard let location = S3Location(url), !location.key.isEmpty else {
            throw TileError(.invalidArgument, "not an object's URL: s3://BUCKET/KEY")
        }
        let client = S3Client(configuration: try S3Configuration.fromEnvironment())
        guard let object = try await client.head(bucket: location.bucket, key: location.key) else {
            throw TileError(.invalidArgument, "no such object (HeadObject: HTTP 404)")
        }
        if object.size == 0 { throw TileError(.truncated, "empty input") }
        for size in [64 << 10, 1 << 20, 16 << 20] {
            let count = min(size, object.size)
            // Each read of the version HEAD saw: a header is never read from two versions of the object.
            let bytes: ByteBuffer
            do throws(S3Error) {
                bytes = try await client.get(
                    bucket: location.bucket, key: location.key, range: 0...(count - 1), ifMatch: object.entityTag.isEmpty ? nil : object.entityTag,
                    limit: count)
            } catch {
                if error.status == 412 { throw TileError(.io, "the object was replaced while its header was read: run tiler info again") }
                throw error
            }
            let header = Result { () throws(TileError) in try ImageInfo.read(data: Data(bytes.readableBytesView)) }
            if case .failure(let error) = header, error.code == .truncated, count < object.size { continue }
            return try header.get()
        }
        throw TileError(
            .truncated,
            "no whole header in the object's first 16 MiB (a TIFF may keep its directory at its end: download it and run tiler info on the file)")
    }
}
