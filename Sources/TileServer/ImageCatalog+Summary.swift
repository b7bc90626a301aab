import Foundation
import TileActors
import TileCore

extension ImageCatalog {
    /// What a listing shows of an image, without building it.
    public struct Summary: Sendable, Hashable {
        public enum State: String, Sendable, Hashable {
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

    /// The summary of `id`, or nil when there is no such image.
    public func summary(_ id: String) async -> Summary? {
        guard var summary = stateSummary(id) else { return nil }
        if case .building(let builder, _) = entries[id] {
            let (received, expected, rows) = (await builder.bytesReceived, await builder.expectedBytes, await builder.rowsDecoded)
            (summary.bytesReceived, summary.expectedBytes, summary.rowsDecoded) = (received, expected, rows)
        }
        return summary
    }

    private func stateSummary(_ id: String) -> Summary? {
        guard Self.isValidIdentifier(id) else { return nil }
        if uploads.contains(id) {
            var summary = Summary(id: id, state: .building, levelsComplete: 0, levelCount: 0, tileRowsComplete: 0)
            if case .failed(let error) = entries[id] { (summary.state, summary.error) = (.failed, error.message) }
            if let image = builderImages[id] ?? nil { fill(&summary, from: image) }
            return summary
        }
        guard let source = source(for: id) else { return nil }
        var summary = Summary(id: id, state: .notBuilt, levelsComplete: 0, levelCount: 0, tileRowsComplete: 0)
        var image: TiledImage?
        switch entries[id] {
        case .ready(let ready):
            summary.state = .ready
            image = ready
        case .building:
            summary.state = .building
            image = builderImages[id] ?? nil
        case .closed:
            summary.state = .ready
            image = try? TiledImage.open(store: "\(cache)/\(id).tiles")
        case .failed(let error):
            summary.state = .failed
            summary.error = error.message
        case nil:
            if case .store(let path) = source {
                image = try? TiledImage.open(store: path)
                summary.state = image == nil ? .failed : .ready
            }
        }
        if let image {
            fill(&summary, from: image)
        } else if case .jpeg(let path) = source, let info = try? ImageInfo.read(contentsOfFile: path) {
            let turned = (info.exifOrientation ?? 1) >= 5
            (summary.width, summary.height) = turned ? (info.height, info.width) : (info.width, info.height)
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
