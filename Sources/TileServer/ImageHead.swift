import HTTPTypes
import NIOCore

/// The header fields of an image answer (a tile, a region) other than its length: the one place they
/// are decided. The routes send them as Hummingbird's fields (``fields``); the connection handler
/// writes them as bytes (``write(notModified:contentLength:into:)``), in the same order.
struct ImageHead: Sendable {
    let mediaType: String
    /// The IIIF profile `Link`; nil for a DeepZoom tile.
    let link: String?
    /// The strong validator, derived from the source's fingerprint and the request; nil for an image of
    /// a pyramid still being built (then `Cache-Control: no-store`).
    let entityTag: EntityTag?
    /// The source's modification time as an HTTP date, with the entity tag.
    let lastModified: String?
    let cacheControl: String

    /// - Parameter cacheControl: `Cache-Control` with an entity tag (without one: `no-store`).
    init(mediaType: String, link: String? = nil, entityTag: EntityTag? = nil, lastModified: String? = nil, cacheControl: String) {
        (self.mediaType, self.link, self.entityTag) = (mediaType, link, entityTag)
        self.lastModified = entityTag == nil ? nil : lastModified
        self.cacheControl = entityTag == nil ? "no-store" : cacheControl
    }

    /// The fields as the routes send them (before `Content-Length`, which the body sets).
    var fields: HTTPFields {
        var fields: HTTPFields = [.contentType: mediaType]
        if let link { fields[.link] = link }
        if let entityTag { fields[.eTag] = entityTag.text }
        if let lastModified { fields[.lastModified] = lastModified }
        fields[.cacheControl] = cacheControl
        fields[.accessControlAllowOrigin] = "*"
        fields[.xContentTypeOptions] = "nosniff"
        return fields
    }

    /// Writes the head of a 200 answer (or a 304, which carries the 200's fields and length) up to the
    /// `Date` field, which the caller adds with the blank line that ends the head (``HTTPDate/line()``).
    func write(notModified: Bool = false, contentLength: Int, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(notModified ? "HTTP/1.1 304 Not Modified\r\nContent-Type: " : "HTTP/1.1 200 OK\r\nContent-Type: ")
        buffer.writeString(mediaType)
        if let link {
            buffer.writeStaticString("\r\nLink: ")
            buffer.writeString(link)
        }
        if let entityTag {
            buffer.writeStaticString("\r\nETag: ")
            entityTag.write(into: &buffer)
        }
        if let lastModified {
            buffer.writeStaticString("\r\nLast-Modified: ")
            buffer.writeString(lastModified)
        }
        buffer.writeStaticString("\r\nCache-Control: ")
        buffer.writeString(cacheControl)
        buffer.writeStaticString("\r\nAccess-Control-Allow-Origin: *\r\nX-Content-Type-Options: nosniff\r\nContent-Length: ")
        buffer.writeString(String(contentLength))
        buffer.writeStaticString("\r\nServer: ")
        buffer.writeString(TileServer.serverName)
        buffer.writeStaticString("\r\n")
    }
}

extension HTTPField.Name {
    static let link = Self("Link")!
}
