public import Foundation

/// A IIIF Presentation manifest of images served by a IIIF image service: what viewers (Mirador,
/// Universal Viewer, Clover) open. One canvas a page, each painted by one image whose service is
/// the page's image service; a thumbnail of the first page with a service of its own.
///
/// ``encoded(version:pretty:)`` writes Presentation API 3.0 (`Manifest`, `Canvas`, `AnnotationPage`,
/// `Annotation` with motivation `painting`, labels as language maps, services of type
/// `ImageService3`) or 2.1 (`sc:Manifest` with one `sc:Sequence` of `sc:Canvas`es, images as
/// `oa:Annotation`s, Image API 2 services), as their specifications' sections 2-3 and 5 lay them out.
public struct IIIFManifest: Sendable, Hashable {
    /// A page: a canvas of the image's display size, painted by an image of its image service.
    public struct Page: Sendable, Hashable {
        /// The page's label (shown by viewers under its thumbnail).
        public var label: String
        /// The image service's URI (what `info.json` follows; no trailing slash).
        public var service: String
        /// The service's profile: `level2` (a server), `level0` (static files).
        public var profile: String
        /// The format of the images named (the painting image and the thumbnail).
        public var format: ImageRequest.Format
        public var width: Int
        public var height: Int
        /// The painting image's size: the canvas's for a server (`full/max`), the largest whole-image
        /// file of a static export (the level that fits one tile).
        public var imageWidth: Int
        public var imageHeight: Int
        /// A size the service answers fast (a level of its pyramid) for thumbnails: at most 256 on
        /// each side where the image is larger (a static export's: no larger than one tile).
        public var thumbnailWidth: Int
        public var thumbnailHeight: Int

        /// A page of `layout`'s image, served at `service`: its thumbnail the largest level at most
        /// 256 pixels on each side (the image's own size when smaller). `staticFiles`: the service is
        /// a static export's (`level0`), which holds whole-image files only for the levels that fit
        /// one tile: the painting image is the largest of those, the thumbnail one of them.
        public init(label: String, service: String, layout: PyramidLayout, format: ImageRequest.Format = .jpg, staticFiles: Bool = false) {
            self.label = label
            self.service = service
            self.format = format
            profile = staticFiles ? "level0" : "level2"
            (width, height) = (layout.width, layout.height)
            let small = (0..<layout.levelCount).first { layout.size(ofLevel: $0).width <= 256 && layout.size(ofLevel: $0).height <= 256 }
            let thumbnail = staticFiles ? max(small ?? 0, layout.firstSingleTileLevel) : small ?? layout.deepZoomTopLevel
            (thumbnailWidth, thumbnailHeight) = layout.size(ofLevel: thumbnail)
            (imageWidth, imageHeight) = staticFiles ? layout.size(ofLevel: layout.firstSingleTileLevel) : (width, height)
        }

        /// The painting image's URI (Image API 3.0 syntax, or 2.1's `full` size).
        func image(version: Version) -> String {
            let size =
                imageWidth == width && imageHeight == height && profile == "level2"
                ? (version == .v3 ? "max" : "full") : "\(imageWidth),\(imageHeight)"
            return "\(service)/full/\(size)/0/default.\(format.rawValue)"
        }

        /// The thumbnail's URI.
        var thumbnail: String { "\(service)/full/\(thumbnailWidth),\(thumbnailHeight)/0/default.\(format.rawValue)" }
    }

    /// The Presentation API version written.
    public enum Version: Sendable {
        case v3, v2

        /// The JSON-LD context of the version.
        public var context: String {
            self == .v3 ? "http://iiif.io/api/presentation/3/context.json" : "http://iiif.io/api/presentation/2/context.json"
        }
    }

    /// A descriptive pair shown by viewers ("Date", "2024:05:01 10:00:00"): Presentation's `metadata`.
    public struct Entry: Sendable, Hashable {
        public var label: String
        public var value: String

        public init(label: String, value: String) {
            (self.label, self.value) = (label, value)
        }
    }

    /// The manifest's URI: where it is served.
    public var id: String
    public var label: String
    /// At least one.
    public var pages: [Page]
    /// Descriptive pairs (3.0: language maps, English labels, values in no stated language).
    public var metadata: [Entry]
    /// The rights of the images (3.0 `rights`, 2.1 `license`): a Creative Commons licence or
    /// RightsStatements.org statement URI (``isRightsURI(_:)``); nil: none stated.
    public var rights: String?
    /// What a viewer must show with the images (3.0 `requiredStatement`, labelled "Attribution";
    /// 2.1 `attribution`); nil: none.
    public var requiredStatement: String?

    /// A file that stands for the whole object outside a viewer (3.0 and 2.1 `rendering`): the
    /// master's download.
    public var rendering: Rendering?

    /// A download: where (`id`), shown as (`label`), of what media type (`format`).
    public struct Rendering: Sendable, Hashable {
        public var id: String
        public var label: String
        public var format: String

        public init(id: String, label: String, format: String) {
            (self.id, self.label, self.format) = (id, label, format)
        }
    }

    /// Whether `uri` may be a manifest's `rights` (Presentation 3.0, 3.3.4): a Creative Commons
    /// licence or a RightsStatements.org statement, by its http(s) URI.
    public static func isRightsURI(_ uri: String) -> Bool {
        ["http://creativecommons.org/", "https://creativecommons.org/", "http://rightsstatements.org/", "https://rightsstatements.org/"]
            .contains { uri.hasPrefix($0) && uri.count > $0.count } && !uri.contains(where: { $0.isWhitespace || $0 == "\"" })
    }

    public init(id: String, label: String, pages: [Page], metadata: [Entry] = []) {
        self.id = id
        self.label = label
        self.pages = pages
        self.metadata = metadata
    }

    /// The descriptive pairs of a master's EXIF (a JPEG's; a TIFF's directory has the same tags):
    /// `ImageDescription` as "Description",
    /// `Artist` as "Creator", `DateTimeOriginal` (else `DateTime`) as "Date", `Copyright` as
    /// "Copyright"; text only, trimmed, at most 1,000 characters each, empty ones left out.
    public static func metadata(exif: [String: EXIFValue]) -> [Entry] {
        let pairs = [
            ("Description", exif["ImageDescription"]), ("Creator", exif["Artist"]), ("Date", exif["DateTimeOriginal"] ?? exif["DateTime"]),
            ("Copyright", exif["Copyright"])
        ]
        return pairs.compactMap { label, value in
            guard case .string(let text)? = value else { return nil }
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines.union(.controlCharacters))
            return trimmed.isEmpty ? nil : Entry(label: label, value: String(trimmed.prefix(1000)))
        }
    }

    /// The document as JSON (keys sorted, slashes not escaped).
    public func encoded(version: Version, pretty: Bool = false) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers only: encoding cannot fail.
        let data = version == .v3 ? try? encoder.encode(PresentationV3.Manifest(self)) : try? encoder.encode(PresentationV2.Manifest(self))
        guard let data else { preconditionFailure("a manifest did not encode") }
        return data
    }

    /// The `n`-th canvas's URI (from 1), under the manifest's.
    func canvas(_ n: Int) -> String { "\(id)/canvas/\(n)" }
}

/// Presentation 3.0's shapes (section 5), as written.
enum PresentationV3 {
    typealias LanguageMap = [String: [String]]

    static func languageMap(_ text: String) -> LanguageMap { ["none": [text]] }

    struct Service: Encodable {
        var id: String
        var type = "ImageService3"
        var profile: String
    }

    struct Image: Encodable {
        var id: String
        var type = "Image"
        var format: String
        var width: Int
        var height: Int
        var service: [Service]
    }

    struct Annotation: Encodable {
        var id: String
        var type = "Annotation"
        var motivation = "painting"
        var body: Image
        var target: String
    }

    struct AnnotationPage: Encodable {
        var id: String
        var type = "AnnotationPage"
        var items: [Annotation]
    }

    struct Canvas: Encodable {
        var id: String
        var type = "Canvas"
        var label: LanguageMap
        var width: Int
        var height: Int
        var thumbnail: [Image]
        var items: [AnnotationPage]
    }

    struct Pair: Encodable {
        var label: LanguageMap
        var value: LanguageMap
    }

    struct Manifest: Encodable {
        var context = IIIFManifest.Version.v3.context
        var id: String
        var type = "Manifest"
        var label: LanguageMap
        var metadata: [Pair]?
        var rights: String?
        var requiredStatement: Pair?
        var rendering: [Rendering]?
        var thumbnail: [Image]
        var items: [Canvas]

        struct Rendering: Encodable {
            var id: String
            var type = "Image"
            var label: LanguageMap
            var format: String
        }

        enum CodingKeys: String, CodingKey {
            case context = "@context"
            case id, type, label, metadata, rights, requiredStatement, rendering, thumbnail, items
        }

        init(_ manifest: IIIFManifest) {
            id = manifest.id
            label = languageMap(manifest.label)
            metadata = manifest.metadata.isEmpty ? nil : manifest.metadata.map { Pair(label: ["en": [$0.label]], value: languageMap($0.value)) }
            rights = manifest.rights
            requiredStatement = manifest.requiredStatement.map { Pair(label: ["en": ["Attribution"]], value: languageMap($0)) }
            rendering = manifest.rendering.map { [Rendering(id: $0.id, label: ["en": [$0.label]], format: $0.format)] }
            let canvases = manifest.pages.enumerated().map { n, page in
                let canvas = manifest.canvas(n + 1)
                let full = Image(
                    id: page.image(version: .v3), format: page.format.mediaType, width: page.imageWidth, height: page.imageHeight,
                    service: [Service(id: page.service, profile: page.profile)])
                return Canvas(
                    id: canvas, label: languageMap(page.label), width: page.width, height: page.height, thumbnail: [Self.thumbnail(page)],
                    items: [
                        AnnotationPage(
                            id: "\(canvas)/page", items: [Annotation(id: "\(canvas)/page/painting", body: full, target: canvas)])
                    ])
            }
            items = canvases
            thumbnail = manifest.pages.prefix(1).map(Self.thumbnail)
        }

        static func thumbnail(_ page: IIIFManifest.Page) -> Image {
            Image(
                id: page.thumbnail, format: page.format.mediaType, width: page.thumbnailWidth, height: page.thumbnailHeight,
                service: [Service(id: page.service, profile: page.profile)])
        }
    }
}
