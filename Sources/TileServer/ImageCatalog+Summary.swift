import Foundation
import TileActors
import TileCore

extension ImageCatalog {
    /// What a listing shows of an image, without building it.
    public struct Summary: Sendable, Hashable, Codable {
        public enum State: String, Sendable, Hashable, Codable {
            /// A store, or a JPEG whose store is built.
            case ready
            /// Being built now.
            case building
            /// A JPEG not asked for yet.
            case notBuilt = "not built"
            case failed
        }
        public var id: String
        /// Display size (from the store, or the JPEG's header); nil when unreadable.
        public var width: Int?
        public var height: Int?
        public var state: State
        /// Levels whose every tile is written, of `levelCount`.
        public var levelsComplete: Int
        public var levelCount: Int
        /// Tile rows of the full-size level written so far.
        public var tileRowsComplete: Int
        /// The build's error, when it failed.
        public var error: String?
        /// Of a build in progress: the JPEG's bytes taken in so far, and of how many (nil: unknown).
        public var bytesReceived: Int?
        public var expectedBytes: Int?
        /// Of a build in progress: full-size rows decoded so far.
        public var rowsDecoded: Int?
    }

    /// The summary of `id`. Looks at the folder (as a lookup does) but starts no build.
    /// - Throws: ``LookupError/invalidIdentifier``, ``LookupError/notFound``, or
    ///   ``LookupError/forbidden`` when the server may not read its file (said in the log, as a
    ///   lookup says it).
    public func summary(_ id: String) async throws(LookupError) -> Summary {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        var summary = Summary(id: id, state: .notBuilt, levelsComplete: 0, levelCount: 0, tileRowsComplete: 0)
        switch phase(of: id) {
        case .building(let build):
            summary.state = .building
            // The builder's last report: its actor may be busy for a while (a slice, a build's last step).
            let progress = build.builder.latestProgress
            (summary.bytesReceived, summary.expectedBytes, summary.rowsDecoded) =
                (progress?.bytesReceived ?? 0, progress?.expectedBytes, progress?.rowsDecoded ?? 0)
            if let image = build.image { fill(&summary, from: image) }
            return summary
        case .ready(let image, _):
            summary.state = .ready
            fill(&summary, from: image.pyramid)
            return summary
        case .copying(let copy):
            summary.state = .building  // copied from the shelf
            summary.expectedBytes = copy.shelved.tiffByteCount
            if let g = copy.served?.pyramid.geometry { (summary.width, summary.height, summary.levelCount) = (g.width, g.height, g.levels.count) }
            return summary
        case .failed(let error, _, _, _):
            (summary.state, summary.error) = (.failed, error.message)
        case .closed:
            summary.state = .ready
        case .unknown, .refused:
            break
        }
        let found: SourceFile?
        do {
            found = try await threadPool.blocking { () throws(TileError) in try self.findSource(id, known: nil) }
        } catch  where SourceFile.isPermissionRefusal(error) {
            throw await refuse(id, error)
        } catch {
            found = nil
        }
        guard let source = found else {
            // A master of the shelf: not built (or the phase's state above); its size known once it is.
            guard let masters else { throw .notFound }
            // Closed, failed: its phase says it is there. In a listing just read: no look.
            if summary.state != .notBuilt || isListed(id) { return summary }
            switch await lookUpMaster(id, on: masters) {
            case .success(.some): return summary
            case .success(.none): throw .notFound
            case .failure(let error): throw .failed(TileError(.notReady, "the masters' shelf \(masters) cannot be asked for \(id): \(error)"))
            }
        }
        let path = source.path, kind = source.kind
        // A store or a TIFF pyramid is served as it is (ready); a master (a TIFF that is no pyramid too) is described from its header.
        let size: (Int, Int, Int, served: Bool)?
        do {
            size = try await threadPool.blocking { () throws(TileError) -> (Int, Int, Int, served: Bool) in
                let served = kind == .store ? try TiledImage.open(store: path) : kind == .tiff ? try ImageCatalog.openPyramid(tiff: path) : nil
                if let g = served?.geometry { return (g.width, g.height, g.levels.count, true) }
                let info = try ImageInfo.read(regularFile: path)
                let g = try TileGeometry(storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
                return (g.width, g.height, g.levels.count, false)
            }
        } catch  where SourceFile.isPermissionRefusal(error) {
            throw await refuse(id, error)  // a store whose manifest may be read, but not its files
        } catch {
            size = nil
        }
        if let (width, height, levels, served) = size {
            (summary.width, summary.height) = (width, height)
            if served, summary.state == .notBuilt { (summary.state, summary.levelsComplete, summary.levelCount) = (.ready, levels, levels) }
        } else if kind != .master {
            summary.state = .failed
        }
        return summary
    }

    private func fill(_ summary: inout Summary, from image: TiledImage) {
        let g = image.geometry
        (summary.width, summary.height, summary.levelCount) = (g.width, g.height, g.levels.count)
        summary.levelsComplete = g.levels.indices.filter { image.isLevelComplete($0) }.count
        summary.tileRowsComplete = (0..<g.levels[0].rows).filter { image.isTileReady(level: 0, column: 0, row: $0) }.count
    }
}
