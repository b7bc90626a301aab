import ArgumentParser
import Foundation
import TileActors
import TileCore
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

struct BuildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build",
        abstract: "Build the tile pyramids of one or more masters (JPEG, PNG, TIFF, JPEG 2000) and print their summaries.",
        discussion: """
            As with cp and mv: when --out is an existing folder that is not a store, each input's store goes inside it as <input file name>.tiles; otherwise --out names the store itself (with several inputs, a folder that is created to receive them). Every page of a multi-page TIFF master is built (or those --pages or --page name), each a store of its own named after its page number as tiler serve writes page identifiers: <name>.tiles for the first, <name>~2.tiles for the second, and so on (so --out then names a folder). A store that exists is replaced only with --force. Two inputs that would get the same store name are refused before anything is built. Without --out, pyramids are ephemeral (in $TMPDIR) and vanish when the command ends. An input of - reads standard input. An s3://BUCKET/KEY input is read from the object store the environment names: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_REGION, AWS_ENDPOINT_URL for a store other than AWS's --out s3://BUCKET/PREFIX publishes TIFF stores to a bucket of that store, named as in a folder (PREFIX itself for one input, unless it ends in /): each built in the system's temporary folder, then its TIFF uploaded, then its manifest.json, last (TILER_S3_ENDPOINT, TILER_S3_REGION, TILER_S3_ACCESS_KEY_ID, TILER_S3_SECRET_ACCESS_KEY first when set; TILER_S3_PATH_STYLE=true|false chooses the addressing, path style by default for a named endpoint).
            """)

    @Argument(
        help:
            "The masters (JPEG, PNG, TIFF, JPEG 2000 files), http(s) URLs, or objects in an S3-compatible store (s3://BUCKET/KEY), downloaded and tiled as the bytes arrive."
    )
    var inputs: [String]

    @Option(help: "Write persistent stores (see below) instead of ephemeral files: a folder, or a bucket's prefix (s3://BUCKET/PREFIX).")
    var out: String?

    @Option(help: "Images built at once, at least 1.")
    var jobs = 4

    @Option(
        help:
            "Store format: tiff (one tiled pyramidal TIFF of JPEG tiles, level 0 copied losslessly from an upright JPEG, the default; WebP tiles with alpha for a PNG, TIFF or JPEG 2000 with alpha: see --compression) or raw (one file of RGBA tiles per level)."
    )
    var format: StoreFormatArgument = .tiff

    @Option(
        help:
            "A TIFF store's tiles: auto (JPEG; WebP for a master with alpha, which keeps it; the default), jpeg (a master with alpha then goes into a raw store), webp (lossy at quality 85, alpha lossless), webp:Q (lossy at Q, 1...100) or webp:lossless."
    )
    var compression: CompressionArgument = CompressionArgument(kind: .automatic)

    @Option(help: "JPEG quality of a TIFF's encoded levels (the lower levels; level 0 too when it cannot be copied), 1...100.")
    var quality = 74

    @Option(
        help:
            "The quantisation tables --quality scales: flattened (Annex K's with their high frequencies finer; the default) or annex-k (what quality means to cjpeg and vips)."
    )
    var tables: TablesArgument = .flattened

    @Option(help: "The pages of a multi-page TIFF master to build: all (the default) or a list such as 0,2-4 (0 the first, as --page).")
    var pages: PagesArgument?

    @Flag(help: "Replace a store that exists where --out puts one (else it is refused, and nothing is built).")
    var force = false

    @OptionGroup var decode: DecodeOptions

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs must be at least 1, not \(jobs).") }
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be within 1...100, not \(quality).") }
        if format == .tiff && decode.tileSize % 16 != 0 {
            throw ValidationError("a TIFF's tiles are a multiple of 16 pixels: --tile-size \(decode.tileSize) needs --format raw.")
        }
        if inputs.filter({ $0 == "-" }).count > 1 { throw ValidationError("standard input (-) can be read only once.") }
        if pages != nil, decode.page != nil { throw ValidationError("--page and --pages name the pages two ways: give one.") }
        if let out, out.hasPrefix("s3://") {
            guard format == .tiff else { throw ValidationError("a store in a bucket is a TIFF store: --out s3://... takes --format tiff.") }
            _ = try Self.bucketStores(names: inputs.map(inputName), out: out)
        } else {
            _ = try Self.storePaths(names: inputs.map(inputName), labels: inputs, out: out)
        }
    }

    /// Where each input's store goes (nil: ephemeral), following cp and mv: an existing folder that is
    /// not a store receives `<name>.tiles`; otherwise `--out` names the store (one input) or a folder
    /// to create (several).
    static func storePaths(names: [String], labels: [String], out: String?) throws -> [String?] {
        guard let out else { return names.map { _ in nil } }
        let isStore = access("\(out)/manifest.json", F_OK) == 0
        if names.count == 1 && (!isDirectory(out) || isStore) { return [out] }
        let folder = out.hasSuffix("/") && out.count > 1 ? String(out.dropLast()) : out
        let paths = names.map { "\(folder)/\($0).tiles" }
        var seen: [String: String] = [:]
        for (input, path) in zip(labels, paths) {
            if let other = seen[path] {
                throw ValidationError(
                    escapingControlCharacters("\(other) and \(input) would both be stored as \(path); build them into different folders."))
            }
            seen[path] = input
        }
        return paths
    }

    func run() async throws {
        var options = decode.buildOptions()
        if format == .tiff {
            options.format = .tiff(
                TIFFWriting(
                    quality: quality, tables: tables.tables, compression: compression.kind, webpQuality: compression.webpQuality,
                    webpLossless: compression.lossless))
        }
        let chosen = options
        let images = try Self.images(of: inputs, pages: pages, page: decode.page)
        // Objects in a bucket, read or written: the store the environment names (AWS's variables, or TILER_S3_*).
        let bucketOut = out.flatMap { $0.hasPrefix("s3://") ? $0 : nil }
        var store: S3Client?
        if let first = bucketOut ?? images.first(where: { $0.input.hasPrefix("s3://") })?.input {
            do { store = S3Client(configuration: try S3Configuration.fromEnvironment()) } catch { throw fail(first, error) }
        }
        let stores: [String?]
        var published: [S3Location]?
        var staging: String?
        defer { if let staging { try? FileManager.default.removeItem(atPath: staging) } }
        if let bucketOut, let store {
            // Built into a folder of the system's temporary one, then published (TIFF, then manifest).
            let locations = try Self.bucketStores(names: images.map(\.name), out: bucketOut)
            if !force { try await Self.refuseTaken(locations, in: store) }
            let folder = NSTemporaryDirectory() + "tiler-publish-\(UUID().uuidString)"
            do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
                throw fail(folder, TileError(.io, "cannot create the folder: \((error as NSError).localizedDescription)"))
            }
            (published, staging) = (locations, folder)
            stores = images.indices.map { "\(folder)/\($0).tiles" }
        } else {
            do { stores = try Self.storePaths(names: images.map(\.name), labels: images.map(\.label), out: out) } catch let error as ValidationError {
                throw fail(out ?? "", TileError(.invalidArgument, error.message))
            }
            // As export: a store that exists is replaced only when asked, and then as one rename.
            if !force, let taken = stores.compactMap({ $0 }).first(where: { access("\($0)/manifest.json", F_OK) == 0 }) {
                throw fail(taken, TileError(.invalidArgument, "a store exists there: not replaced (remove it, or --force replaces it)"))
            }
            if let out, images.count > 1, !isDirectory(out) {
                do { try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true) } catch {
                    throw fail(out, TileError(.io, "cannot create the folder: \((error as NSError).localizedDescription)"))
                }
            }
        }
        var sources: [any ImageSource] = []
        for image in images {
            if image.input.hasPrefix("http://") || image.input.hasPrefix("https://") {
                sources.append(HTTPImageSource(url: image.input))
            } else if let store, image.input.hasPrefix("s3://") {
                guard let location = S3Location(image.input), !location.key.isEmpty, !location.key.hasSuffix("/") else {
                    throw fail(image.input, TileError(.invalidArgument, "not an object's URL: s3://BUCKET/KEY"))
                }
                sources.append(S3ImageSource(client: store, location: location))
            } else {
                sources.append(FileImageSource(path: image.input))
            }
        }
        // A progress line on a terminal only.
        let progress: (@Sendable (Int, ImageBuilder.Progress) -> Void)? = isatty(2) == 1 ? printProgress : nil
        let report = await ImageLoader(maximumConcurrency: jobs).load(
            sources,
            options: { index in
                var o = chosen
                o.page = images[index].page
                if let store = stores[index] { o.storage = .persistent(path: store) }
                return o
            }, onProgress: progress)
        if progress != nil { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        var failed = false
        for result in report.images {
            switch result.result {
            case .success(let image):
                var destination = stores[result.index]
                if let published, let store, let local = destination {
                    do { try await store.publishStore(at: local, to: published[result.index]) } catch {
                        failed = true
                        _ = fail(images[result.index].label, error)
                        continue
                    }
                    destination = published[result.index].description
                }
                if images.count == 1 {
                    printSummary(image, buildTime: result.wallTime, warnings: result.warningCount, lastWarning: result.lastWarning)
                }
                let megabytes = Double(image.totalByteCount) / 1_048_576
                print(
                    String(
                        format: "%@: %dx%d, %d levels, decode %.3f s, wall %.3f s, %.1f MiB%@",
                        escapingControlCharacters(images[result.index].label),
                        image.geometry.width, image.geometry.height, image.levelCount, seconds(result.decodeTime),
                        seconds(result.wallTime), megabytes, destination.map { " -> \(escapingControlCharacters($0))" } ?? ""))
            case .failure(let error):
                failed = true
                _ = fail(images[result.index].label, error)
            }
        }
        // A batch's summary for a batch only: one image's summary is above.
        if images.count > 1 {
            print(
                String(
                    format: "batch: %d images, %d failed, %.3f s from first start to last finish, average decode %.3f s",
                    report.images.count, report.failures.count, seconds(report.wallTime), seconds(report.averageDecodeTime)))
        }
        if failed { throw ExitCode.failure }
    }
}

extension BuildCommand {
    /// One image to build: an input, or a page of a multi-page TIFF master.
    struct Image {
        var input: String
        /// The page, 0 the first.
        var page: Int
        var pageCount: Int
        /// Its store's name: the input's, `~N` after it for page N (from 2), as `tiler serve` names pages.
        var name: String { inputName(input) + (page > 0 ? "~\(page + 1)" : "") }
        /// How messages name it: the input, with the page when the master has several.
        var label: String { pageCount > 1 ? "\(input) page \(page + 1) of \(pageCount)" : input }
    }

    /// The images `inputs` hold: each input once, except a multi-page TIFF master (a file), once for
    /// each of its pages, or of `pages`, or page `page` only.
    /// - Throws: a named page the master does not have.
    static func images(of inputs: [String], pages: PagesArgument?, page: Int?) throws -> [Image] {
        try inputs.flatMap { input throws -> [Image] in
            let isFile = input != "-" && !["http://", "https://", "s3://"].contains { input.hasPrefix($0) }
            // Counted when the file's header is read (not through a link, a FIFO, a TIFF whose first page is unreadable).
            let info = isFile ? try? ImageInfo.read(regularFile: input) : nil
            let count = info?.tiff?.pageCount ?? 1
            let chosen = page.map { [$0] } ?? pages?.pages(count: count) ?? Array(0..<count)
            // --pages names pages of a file (a download's or standard input's are not counted beforehand);
            // --page of an input not counted is checked by the decoder.
            if pages?.list != nil, !isFile, chosen != [0] {
                throw fail(input, TileError(.invalidArgument, "--pages reads a file's pages: download it first, or give --page"))
            }
            // Pages counted are checked (a JPEG's one: its --page 3 was built as `~4`); the others by the decoder.
            if let missing = chosen.first(where: { $0 >= count && (info != nil || pages != nil) }) {
                let what = count > 1 ? "the TIFF" : "the image"
                throw fail(input, TileError(.invalidArgument, "\(what) has no page \(missing) (it has \(count); 0 is the first)"))
            }
            // One page or one image: what --page names.
            return count > 1 ? chosen.map { Image(input: input, page: $0, pageCount: count) } : [Image(input: input, page: page ?? 0, pageCount: 1)]
        }
    }
}

/// `--pages`: `all`, or page numbers and ranges (`0,2-4`), 0 the first.
struct PagesArgument: ExpressibleByArgument {
    var list: [Int]?

    init?(argument: String) {
        if argument == "all" { return }
        var list: [Int] = []
        for part in argument.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map { Int($0) }
            guard let first = bounds.first ?? nil, first >= 0, let last = bounds.count == 2 ? bounds[1] : first, last >= first,
                last - first < 10_000
            else { return nil }
            list += Array(first...last)
        }
        var seen = Set<Int>()
        self.list = list.filter { seen.insert($0).inserted }
    }

    /// The pages named, in the order given, of a master of `count` pages: every one for `all`.
    func pages(count: Int) -> [Int] { list ?? Array(0..<count) }

    static var allValueStrings: [String] { ["all", "0,2-4"] }
    var defaultValueDescription: String { "all" }
}

enum StoreFormatArgument: String, ExpressibleByArgument, CaseIterable { case tiff, raw }

/// `--compression`: a TIFF store's tiles (`auto`, `jpeg`, `webp`, `webp:Q`, `webp:lossless`).
struct CompressionArgument: ExpressibleByArgument, Equatable {
    var kind: TIFFWriting.Compression
    var webpQuality = 85
    var lossless = false

    init(kind: TIFFWriting.Compression) { self.kind = kind }

    init?(argument: String) {
        let parts = argument.split(separator: ":", maxSplits: 1).map(String.init)
        switch parts.first {
        case "auto": kind = .automatic
        case "jpeg": kind = .jpeg
        case "webp": kind = .webp
        default: return nil
        }
        guard parts.count == 2 else { return }
        guard kind == .webp else { return nil }
        if parts[1] == "lossless" {
            lossless = true
        } else if let quality = Int(parts[1]), (1...100).contains(quality) {
            webpQuality = quality
        } else {
            return nil
        }
    }

    static var allValueStrings: [String] { ["auto", "jpeg", "webp", "webp:Q", "webp:lossless"] }
    var defaultValueDescription: String { "auto" }
}

/// `--tables`: a TIFF's quantisation tables.
enum TablesArgument: String, ExpressibleByArgument, CaseIterable {
    case flattened
    case annexK = "annex-k"

    var tables: TIFFWriting.Tables { self == .annexK ? .annexK : .flattened }
}

/// One progress line on stderr, rewritten in place.
@Sendable func printProgress(_ index: Int, _ p: ImageBuilder.Progress) {
    let total = p.expectedBytes.map { String(format: " / %.1f", Double($0) / 1e6) } ?? ""
    let rows = p.height.map { "\(p.rowsDecoded)/\($0)" } ?? "\(p.rowsDecoded)"
    let levels = p.levelTileRowsComplete.map(String.init).joined(separator: ",")
    let megabytes = String(format: "%.1f", Double(p.bytesReceived) / 1e6)
    let line = "\r[\(index)] \(megabytes)\(total) MB, rows \(rows), tile rows per level \(levels)\u{1B}[K"
    FileHandle.standardError.write(Data(line.utf8))
}
