public import Foundation

/// IIIF Image API 3.0 image information (`info.json`), as the specification's section 5 names its
/// properties.
public struct IIIFImageInformation: Codable, Sendable, Hashable {
    public struct Tiles: Codable, Sendable, Hashable {
        public var width: Int
        public var scaleFactors: [Int]
    }

    public struct Size: Codable, Sendable, Hashable {
        public var width: Int
        public var height: Int
    }

    public static let context = "http://iiif.io/api/image/3/context.json"

    public var context = Self.context
    public var id: String
    public var type = "ImageService3"
    public var `protocol` = "http://iiif.io/api/image"
    /// `level0` (static files) or `level2` (a server).
    public var profile: String
    public var width: Int
    public var height: Int
    public var maxWidth: Int?
    public var maxHeight: Int?
    public var maxArea: Int?
    public var sizes: [Size]
    public var tiles: [Tiles]
    public var extraFeatures: [String]?
    public var extraQualities: [String]?
    /// Formats offered besides `jpg` and `png` (`webp`, `avif`).
    public var extraFormats: [String]?

    enum CodingKeys: String, CodingKey {
        case context = "@context"
        case id, type, `protocol`, profile, width, height, maxWidth, maxHeight, maxArea, sizes, tiles, extraFeatures, extraQualities, extraFormats
    }

    /// The document as JSON (keys sorted, slashes not escaped).
    public func encoded(pretty: Bool = false) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers only: encoding cannot fail.
        guard let data = try? encoder.encode(self) else { preconditionFailure("info.json did not encode") }
        return data
    }
}

/// A DeepZoom image descriptor (`.dzi`): the XML form viewers read, and as Codable JSON the same
/// fields in OpenSeadragon's `{"Image": {...}}` form.
public struct DeepZoomDescriptor: Codable, Sendable, Hashable {
    public static let namespace = "http://schemas.microsoft.com/deepzoom/2008"

    /// `jpg` or `png`.
    public var format: String
    public var overlap: Int
    public var tileSize: Int
    public var width: Int
    public var height: Int

    public init(format: String, overlap: Int, tileSize: Int, width: Int, height: Int) {
        (self.format, self.overlap, self.tileSize, self.width, self.height) = (format, overlap, tileSize, width, height)
    }

    /// The XML document.
    public var xml: String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <Image xmlns="\(Self.namespace)" Format="\(format)" Overlap="\(overlap)" TileSize="\(tileSize)">
          <Size Height="\(height)" Width="\(width)"/>
        </Image>

        """
    }

    // The JSON form: every value a string, as in the XML attributes.
    private struct Document: Codable {
        struct Size: Codable { var Width: String, Height: String }
        struct Image: Codable { var xmlns: String, Format: String, Overlap: String, TileSize: String, Size: Size }
        var Image: Image
    }

    public func encode(to encoder: any Encoder) throws {
        try Document(
            Image: .init(
                xmlns: Self.namespace, Format: format, Overlap: String(overlap), TileSize: String(tileSize),
                Size: .init(Width: String(width), Height: String(height)))
        ).encode(to: encoder)
    }

    public init(from decoder: any Decoder) throws {
        let image = try Document(from: decoder).Image
        guard let overlap = Int(image.Overlap), let tileSize = Int(image.TileSize), let width = Int(image.Size.Width),
            let height = Int(image.Size.Height)
        else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a DeepZoom number is not an integer")) }
        self.init(format: image.Format, overlap: overlap, tileSize: tileSize, width: width, height: height)
    }
}

extension PyramidLayout {
    /// The image information of this pyramid.
    /// - Parameters:
    ///   - id: the image service's URI (base URI and identifier, no trailing slash).
    ///   - profile: `level0` for static files, `level2` for a server (default).
    ///   - limits: announced as `maxWidth`, `maxHeight` and `maxArea` (none: not announced).
    ///   - extras: `extraFeatures`, `extraQualities` and `extraFormats` to announce.
    public func iiifInformation(
        id: String, profile: String = "level2", limits: ImageRequest.Limits? = nil,
        extras: (features: [String], qualities: [String], formats: [String])? = nil
    ) -> IIIFImageInformation {
        let single = firstSingleTileLevel
        let sizes = (single..<levelCount).reversed().map { size(ofLevel: $0) }.map { IIIFImageInformation.Size(width: $0.width, height: $0.height) }
        return IIIFImageInformation(
            id: id, profile: profile, width: width, height: height, maxWidth: limits?.maxWidth, maxHeight: limits?.maxHeight,
            maxArea: limits?.maxArea, sizes: sizes, tiles: [.init(width: tileSize, scaleFactors: (0...single).map { 1 << $0 })],
            extraFeatures: extras?.features, extraQualities: extras?.qualities, extraFormats: extras?.formats)
    }

    /// The DeepZoom descriptor of this pyramid's tiles in `format`, with `overlap` pixels of overlap.
    public func deepZoomDescriptor(format: ImageRequest.Format = .jpg, overlap: Int = 0) -> DeepZoomDescriptor {
        DeepZoomDescriptor(format: format.rawValue, overlap: overlap, tileSize: tileSize, width: width, height: height)
    }
}
