public import Foundation

/// IIIF Image API 2.1 image information (`info.json`, section 5 of that version): what most deployed
/// viewers (Mirador 2, Universal Viewer, many OpenSeadragon sites) still read.
public struct IIIFImageInformation2: Codable, Sendable, Hashable {
    /// The second element of `profile`: what the service offers beyond its compliance level.
    public struct ProfileDescription: Codable, Sendable, Hashable {
        public var formats: [String]?
        public var qualities: [String]?
        public var supports: [String]?
        public var maxWidth: Int?
        public var maxHeight: Int?
        public var maxArea: Int?
    }

    public struct Tiles: Codable, Sendable, Hashable {
        public var width: Int
        public var scaleFactors: [Int]
    }

    public static let context = "http://iiif.io/api/image/2/context.json"

    public var context = Self.context
    public var id: String
    public var `protocol` = "http://iiif.io/api/image"
    public var width: Int
    public var height: Int
    /// The compliance level's URI (`http://iiif.io/api/image/2/level2.json`).
    public var complianceLevel: String
    public var profileDescription: ProfileDescription?
    public var sizes: [IIIFImageInformation.Size]
    public var tiles: [Tiles]

    enum CodingKeys: String, CodingKey {
        case context = "@context", id = "@id", `protocol`, width, height, profile, sizes, tiles
    }

    public init(
        id: String, width: Int, height: Int, complianceLevel: String, profileDescription: ProfileDescription?,
        sizes: [IIIFImageInformation.Size], tiles: [Tiles]
    ) {
        (self.id, self.width, self.height, self.complianceLevel) = (id, width, height, complianceLevel)
        (self.profileDescription, self.sizes, self.tiles) = (profileDescription, sizes, tiles)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(context, forKey: .context)
        try container.encode(id, forKey: .id)
        try container.encode(`protocol`, forKey: .protocol)
        try container.encode(width, forKey: .width)
        try container.encode(height, forKey: .height)
        var profile = container.nestedUnkeyedContainer(forKey: .profile)
        try profile.encode(complianceLevel)
        if let profileDescription { try profile.encode(profileDescription) }
        try container.encode(sizes, forKey: .sizes)
        try container.encode(tiles, forKey: .tiles)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        context = try container.decode(String.self, forKey: .context)
        id = try container.decode(String.self, forKey: .id)
        `protocol` = try container.decode(String.self, forKey: .protocol)
        width = try container.decode(Int.self, forKey: .width)
        height = try container.decode(Int.self, forKey: .height)
        var profile = try container.nestedUnkeyedContainer(forKey: .profile)
        complianceLevel = try profile.decode(String.self)
        profileDescription = profile.isAtEnd ? nil : try profile.decode(ProfileDescription.self)
        sizes = try container.decodeIfPresent([IIIFImageInformation.Size].self, forKey: .sizes) ?? []
        tiles = try container.decodeIfPresent([Tiles].self, forKey: .tiles) ?? []
    }

    /// The document as JSON (keys sorted, slashes not escaped).
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { preconditionFailure("info.json did not encode") }
        return data
    }
}

extension PyramidLayout {
    /// The Image API 2.1 image information of this pyramid, at compliance level 2.
    /// - Parameters:
    ///   - id: the image service's URI (base URI and identifier, no trailing slash).
    ///   - limits: announced as `maxWidth`, `maxHeight` and `maxArea` (none: not announced).
    ///   - supports: features beyond level 2 (`mirroring`, `regionSquare`, ...).
    public func iiifInformation2(id: String, limits: ImageRequest.Limits? = nil, supports: [String] = []) -> IIIFImageInformation2 {
        let v3 = iiifInformation(id: id, limits: limits)
        let description = IIIFImageInformation2.ProfileDescription(
            formats: ImageRequest.Format.offered.map(\.rawValue), qualities: ["default", "color", "gray", "bitonal"], supports: supports,
            maxWidth: limits?.maxWidth, maxHeight: limits?.maxHeight, maxArea: limits?.maxArea)
        return IIIFImageInformation2(
            id: id, width: width, height: height, complianceLevel: "http://iiif.io/api/image/2/level2.json", profileDescription: description,
            sizes: v3.sizes, tiles: v3.tiles.map { .init(width: $0.width, scaleFactors: $0.scaleFactors) })
    }
}
