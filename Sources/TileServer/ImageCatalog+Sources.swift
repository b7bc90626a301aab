import Foundation
public import TileCore
import TileActors

#if canImport(Glibc)
import Glibc
#endif

/// The file behind an identifier in the served folder, and which version of it.
struct SourceFile: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// A master (JPEG or PNG), built into a store in the cache folder.
        case master
        /// A store folder (`{id}.tiles`), served as it is; its manifest is what is fingerprinted.
        case store
        /// A TIFF (`{id}.tif`, `.tiff`): a tiled pyramid (libvips', IIPImage's) is served as it is; any
        /// other TIFF is a master, built like a JPEG.
        case tiff
    }

    var kind: Kind
    var path: String
    var fingerprint: SourceFingerprint
    /// The page of a multi-page TIFF master built (0 the first): a page identifier's (`book~2`).
    var page = 0
    /// The master on the catalog's master shelf (a bucket) this is, whose bytes a build streams; nil
    /// for a file of the folder.
    var remote: ShelvedMaster?

    static let masterSuffixes = ["jpg", "jpeg", "JPG", "JPEG", "png", "PNG", "jp2", "JP2", "j2k", "J2K", "j2c", "J2C", "jph", "JPH"]
    static let tiffSuffixes = ["tif", "tiff", "TIF", "TIFF"]
    /// Every suffix a name of the folder is an image by: a master's, a TIFF's, a store folder's.
    static let allSuffixes = masterSuffixes + tiffSuffixes + ["tiles"]

    /// The file behind `id` directly in `root`: a regular master file (`{id}.jpg`, `.jpeg`, `.png`,
    /// `.jp2`, `.j2k`, `.j2c`, `.jph`: its format is told from its bytes when it is built), a pyramidal TIFF, or a store
    /// folder (`{id}.tiles`). Never through a symlink unless `followsSymlinks`, and then only to a
    /// target inside `root`; never waiting on a FIFO or a device (opened non-blocking, then checked to
    /// be a regular file). What is at the name but none of these is skipped, and `skipped` told; so is
    /// a master reached through a link when `rules` decide its target otherwise than `id`
    /// (``keepsRule(_:name:at:root:rules:)``). Blocking: run it on the thread pool.
    /// - Parameters:
    ///   - known: the fingerprint seen last, whose hash is kept while the file's identity is.
    ///   - rules: the access rules (``ImageCatalog/linkRules``).
    /// - Throws: the error of a file the process may not read (``isPermissionRefusal(_:)``), when no
    ///   other file of the name can be read: the image is there, but the server cannot serve it.
    static func find(
        _ id: String, in root: String, known: SourceFingerprint?, followsSymlinks: Bool = false, rules: [AccessPolicy.Rule] = [],
        skipped: (String) -> Void = { _ in }
    ) throws(TileError) -> SourceFile? {
        var refusal: TileError?
        func fingerprint(_ path: String) -> Result<SourceFingerprint, TileError> {
            Result { () throws(TileError) in try SourceFingerprint.read(path: path, known: known) }
        }
        // A later page of a multi-page TIFF master (`book~2`): its TIFF only, a master, never a pyramid.
        let (name, page) = ImageCatalog.page(of: id) ?? (id, 0)
        // In a sub-folder: every folder on the way a real one (or, following links, one inside root).
        guard isServedFolder(name.split(separator: "/").dropLast().joined(separator: "/"), root: root, followsSymlinks: followsSymlinks)
        else { return nil }
        for suffix in page > 0 ? tiffSuffixes : masterSuffixes + tiffSuffixes {
            var path = "\(root)/\(name).\(suffix)"
            let entry = FolderEntry(at: path)
            guard entry != .none else { continue }
            if entry == .symlink, followsSymlinks, let target = FolderEntry.resolved(path, inside: root) { path = target }
            if followsSymlinks, !rules.isEmpty, !keepsRule(id, name: name, at: path, root: root, rules: rules) {
                skipped(path)
                continue
            }
            switch fingerprint(path) {
            case .success(let fingerprint) where page > 0:
                return isPage(page, of: path) ? SourceFile(kind: .master, path: path, fingerprint: fingerprint, page: page) : nil
            case .success(let fingerprint):
                return SourceFile(kind: masterSuffixes.contains(suffix) ? .master : .tiff, path: path, fingerprint: fingerprint)
            case .failure(let error) where isPermissionRefusal(error): refusal = refusal ?? error
            case .failure: skipped(path)
            }
        }
        if page > 0 {
            if let refusal { throw refusal }
            return nil
        }
        let store = "\(root)/\(id).tiles"
        if ![.none, .folder].contains(FolderEntry(at: store)) { skipped(store) }
        if FolderEntry(at: store) == .folder {
            switch fingerprint("\(store)/\(TiledImage.storeManifestName)") {
            case .success(let fingerprint): return SourceFile(kind: .store, path: store, fingerprint: fingerprint)
            case .failure(let error) where isPermissionRefusal(error): refusal = refusal ?? error
            case .failure: break
            }
        }
        if let refusal { throw refusal }
        return nil
    }

    /// Whether every folder on the way from `root` to `folder` (`maps/old`: `maps`, `maps/old`; ""
    /// `root` itself) is a folder, not a link to one (unless `followsSymlinks`, and then to one inside
    /// `root`). Blocking.
    static func isServedFolder(_ path: String, root: String, followsSymlinks: Bool) -> Bool {
        var folder = root
        for part in path.split(separator: "/") {
            // A store folder's files are its own, never images (its `pyramid.tif`).
            guard !part.hasSuffix(".tiles") else { return false }
            folder += "/\(part)"
            switch FolderEntry(at: folder) {
            case .folder: continue
            case .symlink where followsSymlinks && FolderEntry.resolved(folder, inside: root) != nil: continue
            default: return false
            }
        }
        return true
    }

    /// Whether the TIFF at `path` is a master (not a pyramid served as it is, whose directories are
    /// its levels) with a page `page` (0 the first). Blocking.
    static func isPage(_ page: Int, of path: String) -> Bool {
        guard let info = try? ImageInfo.read(tiffPage: 0, ofFile: path), page < info.tiff?.pageCount ?? 1 else { return false }
        return (try? ImageCatalog.openPyramid(tiff: path)) == nil
    }

    /// The pages of the master behind `id` when it is a multi-page TIFF master: each page's identifier
    /// (`book`, `book~2`, ...) and geometry (from its directory), in order; nil for any other image
    /// (one page, a pyramid, not a TIFF). Blocking.
    static func pages(of source: SourceFile, id: String) -> [(id: String, geometry: TileGeometry)]? {
        guard source.page == 0, tiffSuffixes.contains((source.path as NSString).pathExtension),
            let first = try? ImageInfo.read(tiffPage: 0, ofFile: source.path), let count = first.tiff?.pageCount, count > 1,
            (try? ImageCatalog.openPyramid(tiff: source.path)) == nil
        else { return nil }
        // Every page's size from one walk of the directories (opening each page would walk them all again).
        let sizes = (try? ImageInfo.tiffPageSizes(ofFile: source.path)) ?? []
        var pages: [(id: String, geometry: TileGeometry)] = []
        for (page, size) in sizes.prefix(ImageCatalog.mostPages).enumerated() {
            guard let geometry = try? TileGeometry(storedWidth: size.width, storedHeight: size.height, orientation: size.orientation)
            else { continue }
            pages.append((page == 0 ? id : "\(id)~\(page + 1)", geometry))
        }
        return pages
    }

    /// Whether `error` says the process may not read a file (`EACCES`, `EPERM`): a file or store of
    /// another user's, not made readable to the server's.
    static func isPermissionRefusal(_ error: TileError) -> Bool { error.errno == EACCES || error.errno == EPERM }

    /// The sub-folders of `folder` (the served folder `root`, or one inside it) by name, sorted: real
    /// folders (links to folders only when `followsSymlinks`, and then to one inside `root`) whose names
    /// may be identifiers' (never hidden ones), stores (`.tiles`) left out. Blocking.
    static func folders(in folder: String, names: [String], root: String, followsSymlinks: Bool) -> [String] {
        names.filter { name in
            // Images' names are skipped before any look at the entry: a folder of thousands of images costs no lstat.
            guard ImageCatalog.isFileIdentifier(name), !allSuffixes.contains((name as NSString).pathExtension) else { return false }
            switch FolderEntry(at: "\(folder)/\(name)") {
            case .folder: return true
            case .symlink where followsSymlinks:
                return FolderEntry.resolved("\(folder)/\(name)", inside: root).map { FolderEntry(at: $0) == .folder } ?? false
            default: return false
            }
        }.sorted()
    }

    /// The names of the entries of `folder` (none when it cannot be read). Blocking.
    static func names(in folder: String) -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] }

    /// The identifiers a folder's entries `names` would give (not checked to be regular files).
    static func identifiers(among names: [String]) -> [String] {
        Set(
            names.compactMap { name -> String? in
                let (id, suffix) = ((name as NSString).deletingPathExtension, (name as NSString).pathExtension)
                guard ImageCatalog.isFileIdentifier(id), allSuffixes.contains(suffix) else { return nil }
                return id
            }
        ).sorted()
    }
}

extension ImageCatalog {
    /// Whether `id` may name an image: a name in the folder (``isFileIdentifier(_:)``), or in one of
    /// its sub-folders (``isPathIdentifier(_:)``: `maps/berlin`, `%2F` in URLs); or a page identifier
    /// (``page(of:)``).
    public static func isValidIdentifier(_ id: some StringProtocol) -> Bool {
        isPathIdentifier(id) || page(of: id) != nil
    }

    /// Sub-folders an identifier may go down at most (`a/b/c/d/e/f/g/h/name`).
    public static let mostFolderDepth = 8

    /// Whether `path` may name an entry of the folder or of its sub-folders: names
    /// (``isFileIdentifier(_:)``, so never `.`, `..` or hidden) joined by `/`, at most
    /// ``mostFolderDepth`` folders down, at most 200 bytes with each `/` counted as 3 (``cacheName(_:)``).
    public static func isPathIdentifier(_ path: some StringProtocol) -> Bool {
        let names = path.split(separator: "/", omittingEmptySubsequences: false)
        // Its name in the flat cache (`/` as `%2F`) at most 200 bytes, as a file identifier's: with the
        // suffixes of a store being staged, a name stays under the file system's 255.
        guard path.utf8.count + 2 * (names.count - 1) <= 200 else { return false }
        return names.count <= mostFolderDepth + 1 && names.allSatisfy { isFileIdentifier($0) }
    }

    /// The name `id`'s files take in the cache folder, which is flat: `/` written `%2F` (`%` is in no
    /// identifier, so no two identifiers share a name).
    static func cacheName(_ id: String) -> String { id.contains("/") ? id.replacingOccurrences(of: "/", with: "%2F") : id }

    /// `id` as a URL's path segment: its `/` percent-encoded (every other character of an identifier
    /// may stand in a path as it is).
    public static func urlSegment(_ id: String) -> String { cacheName(id) }

    /// Whether `id` may be a name in the folder: letters, digits, `-`, `_` and `.`, not first, at most 200.
    public static func isFileIdentifier(_ id: some StringProtocol) -> Bool {
        guard !id.isEmpty, id.utf8.count <= 200, !id.hasPrefix(".") else { return false }
        return id.utf8.allSatisfy { byte in
            (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || byte == 45 || byte == 95 || byte == 46
        }
    }

    /// Pages of a multi-page TIFF a manifest lists at most.
    static let mostPages = 1_000

    /// A page identifier's image and page: `book~3` is page 3 (index 2) of `book`'s multi-page TIFF
    /// master; the first page is `book` itself. The page number is written without leading zeros,
    /// from 2 to ``mostPages`` (1,000). Nil for anything else.
    public static func page(of id: some StringProtocol) -> (name: String, page: Int)? {
        guard let tilde = id.lastIndex(of: "~") else { return nil }
        let name = id[..<tilde], digits = id[id.index(after: tilde)...]
        guard isPathIdentifier(name), !digits.hasPrefix("0"), digits.count <= 5, digits.utf8.allSatisfy({ (48...57).contains($0) }),
            let number = Int(digits), (2...mostPages).contains(number)
        else { return nil }
        return (String(name), number - 1)
    }

    /// The TIFF at `path` opened as the pyramid it holds, or nil when it holds none to serve as it is
    /// (a stripped or untiled image, tiles this package does not read, or levels that stop before one
    /// tile): such a TIFF is a master, built like a JPEG. Other errors (the file is unreadable) are
    /// thrown. Blocking.
    nonisolated static func openPyramid(tiff path: String) throws(TileError) -> TiledImage? {
        let pyramid: TiledImage
        do { pyramid = try TiledImage.open(tiff: path) } catch {
            if [.invalidStore, .unsupported].contains(error.code) { return nil }
            throw error
        }
        let smallest = pyramid.geometry.levels[pyramid.levelCount - 1]
        let tile = pyramid.geometry.tileSize
        return smallest.width <= tile && smallest.height <= tile ? pyramid : nil
    }

    /// What a Presentation manifest of an image says besides its size: the pages of a multi-page TIFF
    /// master (each page's identifier, `id`, `id~2`, ..., and geometry; nil for any other image) and
    /// the descriptive pairs of a JPEG's EXIF (``IIIFManifest/metadata(exif:)``).
    public struct Presentation: Sendable {
        public var pages: [(id: String, geometry: TileGeometry)]?
        public var metadata: [IIIFManifest.Entry]
        /// The master file, as a download would send it (``master(of:)``); nil for a store folder.
        public var master: Master?
        /// The master's version these were read from; nil when no master was found.
        var fingerprint: SourceFingerprint? = nil

        /// What a document describing the whole master says of it without a build: the first page's
        /// geometry and the master's version. Nil unless the master is a book (``pages``).
        var bookOutline: Outline? {
            guard let first = pages?.first, let fingerprint else { return nil }
            return Outline(geometry: first.geometry, fingerprint: fingerprint)
        }
    }

    /// A master file in the folder, as sent for download: its name there (`{name}.{suffix}`, the last
    /// name of its identifier), size and media type.
    public struct Master: Sendable, Hashable {
        public var name: String
        public var byteCount: Int
        public var mediaType: String

        init(id: String, source: SourceFile) {
            let suffix = (source.path as NSString).pathExtension
            name = "\(id.split(separator: "/").last ?? id[...]).\(suffix)"
            byteCount = source.fingerprint.identity.byteCount
            mediaType = Self.mediaTypes[suffix.lowercased()] ?? "application/octet-stream"
        }

        /// Media types of the masters' suffixes (IANA's: JPEG 2000 codestreams `image/j2c`, HTJ2K `image/jph`).
        static let mediaTypes = [
            "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "tif": "image/tiff", "tiff": "image/tiff",
            "jp2": "image/jp2", "j2k": "image/j2c", "j2c": "image/j2c", "jph": "image/jph"
        ]
    }

    /// ``Presentation`` of `id`, read from its master without building it (a page a directory of a
    /// book: read once a version of the file, then kept).
    public func presentation(of id: String) async -> Presentation {
        guard Self.isPathIdentifier(id) else { return Presentation(pages: nil, metadata: [], master: nil) }
        let known = presentations[id]
        let found = try? await threadPool.blocking { () throws(TileError) -> (SourceFingerprint, Presentation)? in
            guard let source = try self.findSource(id, known: known?.fingerprint), source.kind != .store else { return nil }
            if let known, known.fingerprint == source.fingerprint { return (source.fingerprint, known.presentation) }
            let exif = (try? ImageInfo.read(regularFile: source.path))?.exif ?? [:]
            let presentation = Presentation(
                pages: SourceFile.pages(of: source, id: id), metadata: IIIFManifest.metadata(exif: exif), master: Master(id: id, source: source))
            return (source.fingerprint, presentation)
        }
        guard let (fingerprint, read) = found ?? nil else { return Presentation(pages: nil, metadata: [], master: nil) }
        var presentation = read
        presentation.fingerprint = fingerprint
        if presentations.count >= Self.mostPresentations, presentations[id] == nil { presentations.remove(at: presentations.startIndex) }
        presentations[id] = (fingerprint, presentation)
        return presentation
    }

    /// What `folder` holds ("" the served folder; else a sub-folder, `maps/old`): its images'
    /// identifiers (`maps/old/berlin`) and its sub-folders' paths, each sorted. Nil when it is not a
    /// folder that may be served (a hidden one, a link the catalogue does not follow, too deep).
    public func contents(ofFolder folder: String) async -> (images: [String], folders: [String])? {
        guard folder.isEmpty || Self.isPathIdentifier(folder) else { return nil }
        let (root, follows, rules) = (self.root, followsSymlinks, linkRules)
        // One listing of the folder gives both (a folder of thousands of images is read once a request).
        let found = await threadPool.blocking { () -> (images: [String], folders: [String])? in
            let path = folder.isEmpty ? root : "\(root)/\(folder)"
            guard SourceFile.isServedFolder(folder, root: root, followsSymlinks: follows) else { return nil }
            let names = SourceFile.names(in: path)
            let prefix = folder.isEmpty ? "" : folder + "/"
            let folders =
                folder.split(separator: "/").count >= Self.mostFolderDepth
                ? [] : SourceFile.folders(in: path, names: names, root: root, followsSymlinks: follows)
            let kept = folders.filter { name in
                !follows || rules.isEmpty || SourceFile.keepsRule(folder: prefix + name, at: "\(path)/\(name)", root: root, rules: rules)
            }
            return (SourceFile.identifiers(among: names).map { prefix + $0 }, kept.map { prefix + $0 })
        }
        let shelved = await shelvedContents(ofFolder: folder)
        // A folder only the shelf holds is one all the same (the folder's own rules for the rest).
        let onShelfOnly = !shelved.images.isEmpty || !shelved.folders.isEmpty
        guard let found = found ?? (onShelfOnly && Self.isServedPath(folder) ? ([], []) : nil) else { return nil }
        let images = Set(found.images).union(shelved.images).union(folder.isEmpty ? uploading : [])
        return (images.sorted(), Set(found.folders).union(shelved.folders).sorted())
    }

    /// Whether `folder` may be a folder of the shelf's: no part of it a store's (`.tiles`).
    private static func isServedPath(_ folder: String) -> Bool {
        folder.isEmpty || !folder.split(separator: "/").contains { $0.hasSuffix(".tiles") }
    }

    /// The identifiers of the uploads being received (not in the folder yet).
    private var uploading: [String] {
        entries.compactMap { id, entry in if case .building(let build) = entry.phase, build.isUpload { id } else { nil } }
    }

    /// The identifiers offered now, sorted: JPEGs and stores directly in the folder (and at the top of
    /// the master shelf).
    public func identifiers() async -> [String] {
        let root = self.root
        let found = await threadPool.blocking { SourceFile.identifiers(among: SourceFile.names(in: root)) }
        return Set(found).union(uploading).union(await shelvedContents(ofFolder: "").images).sorted()
    }
}

/// The cache store built from a JPEG remembers which version of the JPEG it was built from in a file
/// beside it (`{id}.source`: the fingerprint's text), so that a restarted server reuses it after a
/// `stat` and two small reads instead of reading the whole JPEG again.
enum CacheStoreRecord {
    static func path(ofStore store: String) -> String { String(store.dropLast(".tiles".count)) + ".source" }

    /// Whether the store at `store` was built from `source` as it is now. Blocking.
    static func isStore(_ store: String, builtFrom source: SourceFile) -> Bool {
        guard let byteCount = TiledImage.sourceByteCount(ofStore: store), byteCount == source.fingerprint.identity.byteCount
        else { return false }
        if let text = try? String(contentsOfFile: path(ofStore: store), encoding: .utf8) {
            return text == source.fingerprint.description
        }
        // Built by an older server, or the record was lost: the whole source compared, once (a master
        // of the shelf has no file to compare: built again).
        guard source.remote == nil, (try? TiledImage.isStore(store, builtFrom: source.path)) == true else { return false }
        write(source.fingerprint, forStore: store)
        return true
    }

    /// Records the fingerprint of the source `store` was built from (replacing the file at once).
    static func write(_ fingerprint: SourceFingerprint, forStore store: String) {
        let target = path(ofStore: store)
        let temporary = "\(target).partial-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // Created exclusively: a file or symlink planted at the name is never written through.
        guard (try? Data(fingerprint.description.utf8).write(to: URL(fileURLWithPath: temporary), options: .withoutOverwriting)) != nil
        else { return }
        if rename(temporary, target) != 0 { unlink(temporary) }
    }

    static func remove(forStore store: String) { unlink(path(ofStore: store)) }
}
