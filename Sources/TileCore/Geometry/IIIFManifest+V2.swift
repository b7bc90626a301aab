import Foundation

/// Presentation 2.1's shapes (sections 5.1-5.4), as written.
enum PresentationV2 {
    struct Service: Encodable {
        var context = "http://iiif.io/api/image/2/context.json"
        var id: String
        var profile: String

        init(id: String, profile: String) {
            self.id = id
            self.profile = "http://iiif.io/api/image/2/\(profile).json"
        }

        enum CodingKeys: String, CodingKey {
            case context = "@context"
            case id = "@id"
            case profile
        }
    }

    struct Resource: Encodable {
        var id: String
        var type = "dctypes:Image"
        var format: String
        var width: Int
        var height: Int
        var service: Service

        enum CodingKeys: String, CodingKey {
            case id = "@id"
            case type = "@type"
            case format, width, height, service
        }
    }

    struct Annotation: Encodable {
        var id: String
        var type = "oa:Annotation"
        var motivation = "sc:painting"
        var resource: Resource
        var on: String

        enum CodingKeys: String, CodingKey {
            case id = "@id"
            case type = "@type"
            case motivation, resource, on
        }
    }

    struct Canvas: Encodable {
        var id: String
        var type = "sc:Canvas"
        var label: String
        var width: Int
        var height: Int
        var thumbnail: Resource
        var images: [Annotation]

        enum CodingKeys: String, CodingKey {
            case id = "@id"
            case type = "@type"
            case label, width, height, thumbnail, images
        }
    }

    struct Sequence: Encodable {
        var id: String
        var type = "sc:Sequence"
        var canvases: [Canvas]

        enum CodingKeys: String, CodingKey {
            case id = "@id"
            case type = "@type"
            case canvases
        }
    }

    struct Manifest: Encodable {
        var context = IIIFManifest.Version.v2.context
        var id: String
        var type = "sc:Manifest"
        var label: String
        var metadata: [Pair]?
        var license: String?
        var attribution: String?
        var rendering: Rendering?
        var thumbnail: Resource?
        var sequences: [Sequence]

        struct Pair: Encodable {
            var label: String
            var value: String
        }

        struct Rendering: Encodable {
            var id: String
            var label: String
            var format: String

            enum CodingKeys: String, CodingKey {
                case id = "@id"
                case label, format
            }
        }

        enum CodingKeys: String, CodingKey {
            case context = "@context"
            case id = "@id"
            case type = "@type"
            case label, metadata, license, attribution, rendering, thumbnail, sequences
        }

        init(_ manifest: IIIFManifest) {
            id = manifest.id
            label = manifest.label
            metadata = manifest.metadata.isEmpty ? nil : manifest.metadata.map { Pair(label: $0.label, value: $0.value) }
            (license, attribution) = (manifest.rights, manifest.requiredStatement)
            rendering = manifest.rendering.map { Rendering(id: $0.id, label: $0.label, format: $0.format) }
            let canvases = manifest.pages.enumerated().map { n, page in
                let canvas = manifest.canvas(n + 1)
                let full = Resource(
                    id: page.image(version: .v2), format: page.format.mediaType, width: page.imageWidth, height: page.imageHeight,
                    service: Service(id: page.service, profile: page.profile))
                return Canvas(
                    id: canvas, label: page.label, width: page.width, height: page.height, thumbnail: Self.thumbnail(page),
                    images: [Annotation(id: "\(canvas)/painting", resource: full, on: canvas)])
            }
            sequences = [Sequence(id: "\(manifest.id)/sequence/normal", canvases: canvases)]
            thumbnail = manifest.pages.first.map(Self.thumbnail)
        }

        static func thumbnail(_ page: IIIFManifest.Page) -> Resource {
            Resource(
                id: page.thumbnail, format: page.format.mediaType, width: page.thumbnailWidth, height: page.thumbnailHeight,
                service: Service(id: page.service, profile: page.profile))
        }
    }
}
