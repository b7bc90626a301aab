public import TileCore

/// Makes resized copies and thumbnails off the caller's thread, one job at a time by default (each can
/// be memory-heavy), through a ``HeavyWorkQueue`` whose jobs decode, encode and sync on its thread pool
/// (never the cooperative pool); and keeps a small memory cache of decoded
/// thumbnails for display, released explicitly with ``unload(_:)`` or by eviction.
public actor Thumbnailer {
    private struct CacheKey: Hashable, Sendable {
        var path: String
        var maxEdge: Int
    }

    /// The queue every job goes through.
    public let queue: HeavyWorkQueue
    /// Most bytes of decoded pixels kept in the cache (least recently used first out).
    public let cacheByteLimit: Int
    private var cache: [CacheKey: RGBAPixels] = [:]
    private var uses = UseOrder<CacheKey>()

    /// - Parameters:
    ///   - queue: the heavy-work queue (default: a new one running one job at a time).
    ///   - cacheByteLimit: default 64 MiB.
    public init(queue: HeavyWorkQueue = HeavyWorkQueue(maximumConcurrency: 1), cacheByteLimit: Int = 64 << 20) {
        self.queue = queue
        self.cacheByteLimit = cacheByteLimit
    }

    /// Writes the targets of one photo (one decode); see `ImageResizer.resize(contentsOfFile:to:options:)`.
    /// - Throws: `CancellationError` when the caller is cancelled before the job starts (nothing is
    ///   written), else the resizer's `TileError`.
    public func makeCopies(
        of path: String, targets: [ImageResizer.Target], options: ImageResizer.Options = ImageResizer.Options()
    ) async throws -> [ImageResizer.Result] {
        try await queue.runBlocking { try ImageResizer.resize(contentsOfFile: path, to: targets, options: options) }
    }

    /// The upright decoded pixels of a thumbnail of `path` (longest edge `maxEdge`), from the cache or
    /// made off the caller's thread and cached.
    public func pixels(of path: String, maxEdge: Int) async throws -> RGBAPixels {
        let key = CacheKey(path: path, maxEdge: maxEdge)
        if let hit = cache[key] {
            uses.use(key)
            return hit
        }
        var settings = ImageResizer.Options()
        settings.returnsPixels = true
        let options = settings
        let results = try await queue.runBlocking {
            try ImageResizer.resize(contentsOfFile: path, to: [.init(maxEdge: maxEdge, path: nil)], options: options)
        }
        guard let pixels = results.first?.pixels else { throw TileError(.invalidArgument, "no pixels for \(path)") }
        cache[key] = pixels
        uses.use(key)
        evict()
        return pixels
    }

    /// Drops every cached thumbnail of `path` (the image is no longer shown).
    public func unload(_ path: String) {
        cache = cache.filter { $0.key.path != path }
        uses.removeAll { $0.path == path }
    }

    /// Bytes of decoded pixels held in the cache.
    public var cachedByteCount: Int { cache.values.reduce(0) { $0 + $1.bytes.count } }

    /// Drops the least recently used thumbnails (`UseOrder`, the package's one recency rule) until the
    /// rest fit ``cacheByteLimit``.
    private func evict() {
        var excess = cachedByteCount - cacheByteLimit
        for key in uses.oldestFirst(cache.keys) where excess > 0 {
            excess -= cache.removeValue(forKey: key)?.bytes.count ?? 0
            uses.remove(key)
        }
    }
}
