public import Foundation

/// A IIIF Presentation collection: manifests and other collections, listed by id and label (no
/// image is looked at). ``encoded(version:pretty:)`` writes Presentation 3.0 (`Collection`, its
/// `items` referencing `Manifest`s and `Collection`s) or 2.1 (`sc:Collection` with `manifests` and
/// `collections`).
public struct IIIFCollection: Sendable, Hashable {
    /// What a collection lists.
    public struct Member: Sendable, Hashable {
        public enum Kind: Sendable, Hashable { case manifest, collection }
        public var kind: Kind
        public var id: String
        public var label: String

        public init(_ kind: Kind, id: String, label: String) {
            (self.kind, self.id, self.label) = (kind, id, label)
        }
    }

    /// The collection's URI: where it is served.
    public var id: String
    public var label: String
    public var members: [Member]

    public init(id: String, label: String, members: [Member]) {
        (self.id, self.label, self.members) = (id, label, members)
    }

    /// The document as JSON (keys sorted, slashes not escaped).
    public func encoded(version: IIIFManifest.Version, pretty: Bool = false) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        let data = version == .v3 ? try? encoder.encode(PresentationV3.Collection(self)) : try? encoder.encode(PresentationV2.Collection(self))
        guard let data else { preconditionFailure("a collection did not encode") }
        return data
    }
}

extension PresentationV3 {
    struct Reference: Encodable {
        var id: String
        var type: String
        var label: LanguageMap
    }

    struct Collection: Encodable {
        var context = IIIFManifest.Version.v3.context
        var id: String
        var type = "Collection"
        var label: LanguageMap
        var items: [Reference]

        enum CodingKeys: String, CodingKey {
            case context = "@context"
            case id, type, label, items
        }

        init(_ collection: IIIFCollection) {
            id = collection.id
            label = languageMap(collection.label)
            items = collection.members.map {
                Reference(id: $0.id, type: $0.kind == .manifest ? "Manifest" : "Collection", label: languageMap($0.label))
            }
        }
    }
}

extension PresentationV2 {
    struct Reference: Encodable {
        var id: String
        var type: String
        var label: String

        enum CodingKeys: String, CodingKey {
            case id = "@id"
            case type = "@type"
            case label
        }
    }

    struct Collection: Encodable {
        var context = IIIFManifest.Version.v2.context
        var id: String
        var type = "sc:Collection"
        var label: String
        var manifests: [Reference]?
        var collections: [Reference]?

        enum CodingKeys: String, CodingKey {
            case context = "@context"
            case id = "@id"
            case type = "@type"
            case label, manifests, collections
        }

        init(_ collection: IIIFCollection) {
            id = collection.id
            label = collection.label
            let manifests = collection.members.filter { $0.kind == .manifest }.map { Reference(id: $0.id, type: "sc:Manifest", label: $0.label) }
            let collections = collection.members.filter { $0.kind == .collection }.map {
                Reference(id: $0.id, type: "sc:Collection", label: $0.label)
            }
            self.manifests = manifests.isEmpty && !collections.isEmpty ? nil : manifests
            self.collections = collections.isEmpty ? nil : collections
        }
    }
}
