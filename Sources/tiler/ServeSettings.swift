import ArgumentParser
import Configuration
import Foundation
import Logging
import SystemPackage
import TileCore
import TileNetwork
import TileServer

/// Every setting of `tiler serve`, with its default, from three places in order of precedence: the
/// command line (`--cache-budget`), the environment (`TILER_CACHE_BUDGET`), a JSON file (`--config`,
/// or `TILER_CONFIG`: `{"cacheBudget": 10000000000}`), read with swift-configuration. A value that is
/// not what its key takes is refused at start, naming the key and the place it came from.
struct ServeSettings {
    var folder: String
    var host = "127.0.0.1"
    var port = 8080
    var cache: String?
    var publicURL: String?
    var allowUploads = false
    var uploadToken: String?
    var allowedHosts: [String] = []
    var uploadOrigins: [String] = []
    var trustedProxies: [String] = []
    var followSymlinks = false
    var maxConnections = 4096
    var maxUploads = 8
    var maxUploadBytes = 1 << 30
    var maxPendingBuilds = 16
    var cacheBudget: Int?
    var format = StoreFormatArgument.tiff
    var quality = 74
    var tables = TablesArgument.flattened
    var jpegQuality = TileJPEGEncoder.defaultQuality
    var webpQuality = OutputEncoding.defaultWebPQuality
    var webpLossless = false
    var avifQuality = OutputEncoding.defaultAVIFQuality
    var webpMethod = OutputEncoding.Effort.defaultWebPMethod
    var webpSharpYuv = false
    var avifSpeed = OutputEncoding.Effort.defaultAVIFSpeed
    var avifChroma = "420"
    /// MiB the renders running at once may hold (``TileServer/RenderLimits/runningFootprint``, whose
    /// RGBA pixels are 4 bytes: 2^18 a MiB).
    var renderMemory = 256
    var imageMaxAge = 86_400
    var documentMaxAge = 300
    var metrics = true
    var accessLog = true
    var accessLogFile: String?
    var accessLogFormat = "common"
    var logLevel = "info"
    var idleTimeout = 60
    var bucketTimeout = 10
    var adminToken: String?
    var purgeURLs: [String] = []
    var rights: String?
    var requiredStatement: String?
    var downloads = false
    var store: String?
    var source: String?
    /// Restricted images (the config file's `access`, ``AccessSettings``).
    var access: AccessPolicy?
    /// Whether ``folder`` is the server's own empty one (only a master shelf was given): created at start.
    var folderIsOwn = false

    /// The settings' keys in the config file (camel case); the environment's are `TILER_` and the
    /// key in upper snake case, the command line's `--` and the key in kebab case.
    static let keys = [
        "folder", "host", "port", "cache", "publicURL", "allowUploads", "uploadToken", "allowedHosts", "uploadOrigins", "trustedProxies",
        "followSymlinks", "maxConnections", "maxUploads", "maxUploadBytes", "maxPendingBuilds", "cacheBudget", "format", "quality", "tables",
        "jpegQuality", "webpQuality", "webpLossless", "avifQuality", "webpMethod", "webpSharpYuv", "avifSpeed", "avifChroma",
        "renderMemory",
        "imageMaxAge", "documentMaxAge", "metrics", "accessLog", "accessLogFile", "accessLogFormat",
        "logLevel", "idleTimeout", "bucketTimeout", "adminToken", "purgeURLs", "rights", "requiredStatement", "downloads",
        "store", "source", "access"
    ]

    /// Reads the settings: each from the command line when given there, else from the environment or
    /// the config file, else its default; then checks them.
    /// - Throws: `ValidationError` naming the key of a value that is missing, of the wrong type or out of range.
    static func resolve(_ command: ServeCommand) async throws -> ServeSettings {
        let environment = EnvironmentVariablesProvider().prefixKeys(with: ["tiler"])
        var providers: [any ConfigProvider] = [environment]
        let configPath = command.config ?? ProcessInfo.processInfo.environment["TILER_CONFIG"]
        if let configPath {
            do {
                providers.append(try await FileProvider<ServeConfigSnapshot>(filePath: FilePath(configPath)))
            } catch {
                throw ValidationError("the config file \(configPath) cannot be read as JSON: \(error)")
            }
            // A key the server does not know is a mistake worth saying (a typo would be ignored).
            if let data = FileManager.default.contents(atPath: configPath),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let unknown = object.keys.sorted().first(where: { !keys.contains($0) })
            {
                throw ValidationError(
                    "the config file \(configPath) has a key tiler serve does not know: \(unknown) (known: \(keys.joined(separator: ", ")))")
            }
        }
        let reader = ConfigReader(providers: providers)
        let read = Reader(reader: reader)
        _ = read
        let source = try command.source ?? read.string("source")
        let cache = try command.cache ?? read.string("cache")
        var s: ServeSettings
        if let folder = try command.folder ?? read.string("folder") {
            s = ServeSettings(folder: folder)
        } else if source != nil, let cache {
            // Masters in a bucket alone: an empty folder of the server's own (uploads go there) inside the cache.
            s = ServeSettings(folder: "\(cache)/.local-images")
            s.folderIsOwn = true
        } else if source != nil {
            throw ValidationError("source (--source) without a folder needs a cache folder: give --cache (TILER_CACHE, \"cache\").")
        } else {
            throw ValidationError(
                "no folder to serve: give it as the argument, TILER_FOLDER or the config file's \"folder\" (or --source s3://BUCKET/PREFIX).")
        }
        s.source = source
        s.host = try command.host ?? read.string("host") ?? s.host
        s.port = try command.port ?? read.int("port") ?? s.port
        s.cache = cache
        s.publicURL = try command.publicURL ?? read.string("publicURL")
        s.allowUploads = try command.allowUploads ?? read.bool("allowUploads") ?? s.allowUploads
        s.uploadToken = try command.uploadToken ?? read.value("uploadToken") { try reader.requiredString(forKey: $0, isSecret: true) }
        s.allowedHosts = try command.allowedHosts.nonEmpty ?? read.strings("allowedHosts") ?? []
        s.uploadOrigins = try command.uploadOrigins.nonEmpty ?? read.strings("uploadOrigins") ?? []
        s.trustedProxies = try command.trustedProxies.nonEmpty ?? read.strings("trustedProxies") ?? []
        s.followSymlinks = try command.followSymlinks ?? read.bool("followSymlinks") ?? s.followSymlinks
        s.maxConnections = try command.maxConnections ?? read.int("maxConnections") ?? s.maxConnections
        s.maxUploads = try command.maxUploads ?? read.int("maxUploads") ?? s.maxUploads
        s.maxUploadBytes = try command.maxUploadBytes ?? read.int("maxUploadBytes") ?? s.maxUploadBytes
        s.maxPendingBuilds = try command.maxPendingBuilds ?? read.int("maxPendingBuilds") ?? s.maxPendingBuilds
        s.cacheBudget = try command.cacheBudget ?? read.int("cacheBudget")
        if let format = try command.format
            ?? read.string("format").map({ text in
                guard let format = StoreFormatArgument(rawValue: text) else { throw ValidationError("format: \(text) is not tiff or raw") }
                return format
            })
        {
            s.format = format
        }
        s.quality = try command.quality ?? read.int("quality") ?? s.quality
        if let tables = try command.tables
            ?? read.string("tables").map({ text in
                guard let tables = TablesArgument(rawValue: text) else { throw ValidationError("tables: \(text) is not flattened or annex-k") }
                return tables
            })
        {
            s.tables = tables
        }
        s.jpegQuality = try command.jpegQuality ?? read.int("jpegQuality") ?? s.jpegQuality
        s.webpQuality = try command.webpQuality ?? read.int("webpQuality") ?? s.webpQuality
        s.webpLossless = try command.webpLossless ?? read.bool("webpLossless") ?? s.webpLossless
        s.avifQuality = try command.avifQuality ?? read.int("avifQuality") ?? s.avifQuality
        s.webpMethod = try command.webpMethod ?? read.int("webpMethod") ?? s.webpMethod
        s.webpSharpYuv = try command.webpSharpYuv ?? read.bool("webpSharpYuv") ?? s.webpSharpYuv
        s.avifSpeed = try command.avifSpeed ?? read.int("avifSpeed") ?? s.avifSpeed
        s.avifChroma = try command.avifChroma ?? read.string("avifChroma") ?? s.avifChroma
        s.renderMemory = try command.renderMemory ?? read.int("renderMemory") ?? s.renderMemory
        s.imageMaxAge = try command.imageMaxAge ?? read.int("imageMaxAge") ?? s.imageMaxAge
        s.documentMaxAge = try command.documentMaxAge ?? read.int("documentMaxAge") ?? s.documentMaxAge
        s.metrics = try command.metrics ?? read.bool("metrics") ?? s.metrics
        s.accessLog = try command.accessLog ?? read.bool("accessLog") ?? s.accessLog
        s.accessLogFile = try command.accessLogFile ?? read.string("accessLogFile")
        s.accessLogFormat = try command.accessLogFormat ?? read.string("accessLogFormat") ?? s.accessLogFormat
        s.logLevel = try command.logLevel ?? read.string("logLevel") ?? s.logLevel
        s.idleTimeout = try command.idleTimeout ?? read.int("idleTimeout") ?? s.idleTimeout
        s.bucketTimeout = try command.bucketTimeout ?? read.int("bucketTimeout") ?? s.bucketTimeout
        s.adminToken = try command.adminToken ?? read.value("adminToken") { try reader.requiredString(forKey: $0, isSecret: true) }
        s.purgeURLs = try command.purgeURLs.nonEmpty ?? read.strings("purgeURLs") ?? []
        s.rights = try command.rights ?? read.string("rights")
        s.requiredStatement = try command.requiredStatement ?? read.string("requiredStatement")
        s.downloads = try command.downloads ?? read.bool("downloads") ?? s.downloads
        s.store = try command.store ?? read.string("store")
        try s.check()
        if let configPath {
            s.access = try AccessSettings.policy(configPath: configPath, trustedProxies: s.trustedProxies.compactMap(AddressRange.init))
        }
        return s
    }

    /// The ranges each setting must be in.
    func check() throws {
        func require(_ ok: Bool, _ key: String, _ rule: String) throws {
            if !ok { throw ValidationError("\(key) \(rule).") }
        }
        try require((0...65535).contains(port), "port", "must be 0-65535")
        try require(maxConnections > 0, "maxConnections (--max-connections)", "must be positive")
        try require(maxUploads > 0, "maxUploads (--max-uploads)", "must be positive")
        try require(maxUploadBytes > 0, "maxUploadBytes (--max-upload-bytes)", "must be positive")
        try require(maxPendingBuilds >= 0, "maxPendingBuilds (--max-pending-builds)", "must not be negative")
        try require(cacheBudget.map { $0 > 0 } ?? true, "cacheBudget (--cache-budget)", "must be positive")
        try require((1...100).contains(quality), "quality (--quality)", "must be 1-100")
        try require((1...100).contains(jpegQuality), "jpegQuality (--jpeg-quality)", "must be 1-100")
        try require((1...100).contains(webpQuality), "webpQuality (--webp-quality)", "must be 1-100")
        try require((1...100).contains(avifQuality), "avifQuality (--avif-quality)", "must be 1-100")
        try require((0...6).contains(webpMethod), "webpMethod (--webp-method)", "must be 0-6")
        try require((0...10).contains(avifSpeed), "avifSpeed (--avif-speed)", "must be 0-10")
        try require(["420", "444"].contains(avifChroma), "avifChroma (--avif-chroma)", "must be 420 or 444")
        // At most 1 TiB: past it, the bytes would not hold in the footprint's pixels on every platform.
        try require((1...(1 << 20)).contains(renderMemory), "renderMemory (--render-memory)", "must be 1-1048576 MiB")
        try require(
            imageMaxAge >= 0 && documentMaxAge >= 0, "imageMaxAge and documentMaxAge (--image-max-age, --document-max-age)", "must not be negative")
        // At most a day: a longer wait is no timeout, and seconds past 2^33 overflow the clocks' nanoseconds.
        try require((1...86_400).contains(idleTimeout), "idleTimeout (--idle-timeout)", "must be 1-86400 seconds")
        try require((1...86_400).contains(bucketTimeout), "bucketTimeout (--bucket-timeout)", "must be 1-86400 seconds")
        try require(
            Logger.Level(rawValue: logLevel) != nil, "logLevel (--log-level)", "must be trace, debug, info, notice, warning, error or critical")
        try require(
            AccessLog.Format(rawValue: accessLogFormat) != nil, "accessLogFormat (--access-log-format)", "must be common or combined")
        try require(adminToken.map { $0.count >= 16 } ?? true, "adminToken (--admin-token)", "must be at least 16 characters")
        try require(
            rights.map(IIIFManifest.isRightsURI) ?? true, "rights (--rights)",
            "must be a Creative Commons licence or RightsStatements.org statement URI (http://creativecommons.org/licenses/by/4.0/)")
        try require(
            requiredStatement.map { !$0.isEmpty && $0.count <= 1000 } ?? true, "requiredStatement (--required-statement)", "must be 1-1000 characters"
        )
        if let source {
            try require(S3Location(source) != nil, "source (--source)", "must be a bucket's URL, s3://BUCKET/PREFIX (the bucket in lower case)")
        }
        if let store {
            try require(S3Location(store) != nil, "store (--store)", "must be a bucket's URL, s3://BUCKET/PREFIX (the bucket in lower case)")
            try require(format == .tiff, "store (--store)", "holds TIFF stores: not with format raw")
        }
        for url in purgeURLs where !Self.isWebURL(url, pathAllowed: true) {
            throw ValidationError("purgeURLs (--purge-url): \(url) is not an http or https URL.")
        }
        // They end up in answers: the ids of info.json, CORS headers.
        if let publicURL, !Self.isWebURL(publicURL, pathAllowed: true) {
            throw ValidationError("publicURL (--public-url): \(publicURL) is not an http or https URL with a host (https://images.example.org/iiif).")
        }
        for origin in uploadOrigins where !Self.isWebURL(origin, pathAllowed: false) {
            throw ValidationError("uploadOrigins (--upload-origin): \(origin) is not an origin (https://app.example, with no path; not null or *).")
        }
        for proxy in trustedProxies where AddressRange(proxy) == nil {
            throw ValidationError("trustedProxies (--trusted-proxy): \(proxy) is not an address or a range (10.0.0.0/8, ::1).")
        }
    }

    /// Whether `text` is an `http` or `https` URL with a host and nothing but a path after it (no user,
    /// query or fragment); with `pathAllowed` false, an origin (no path either).
    static func isWebURL(_ text: String, pathAllowed: Bool) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil, url.query == nil, url.fragment == nil
        else { return false }
        return pathAllowed || url.path.isEmpty
    }

    /// Reads one key through swift-configuration: nil when no provider has it, the value when one
    /// has it as the type asked for, else an error naming the key.
    struct Reader {
        let reader: ConfigReader

        func string(_ key: String) throws -> String? { try value(key) { try reader.requiredString(forKey: $0) } }
        func int(_ key: String) throws -> Int? { try value(key) { try reader.requiredInt(forKey: $0) } }
        func bool(_ key: String) throws -> Bool? { try value(key) { try reader.requiredBool(forKey: $0) } }
        func strings(_ key: String) throws -> [String]? { try value(key) { try reader.requiredStringArray(forKey: $0) } }

        func value<T>(_ key: String, _ get: (ConfigKey) throws -> T) throws -> T? {
            do {
                return try get(ConfigKey(key))
            } catch {
                let text = "\(error)"
                if text.hasPrefix("Missing required config value") { return nil }
                let environmentName = "TILER_" + key.replacing(/([a-z])([A-Z])/) { "\($0.1)_\($0.2)" }.uppercased()
                throw ValidationError("the setting \(key) (\(environmentName) or the config file's \"\(key)\") is not valid: \(text)")
            }
        }
    }
}

extension Array {
    /// Nil when empty: a repeatable option not given.
    var nonEmpty: Self? { isEmpty ? nil : self }
}
