// libFuzzer target for the IIIF Image API request grammar, 3.0 and 2.1, and DeepZoom's tile addresses (TileCore's
// ImageRequest and PyramidLayout, compiled in): what every client of `tiler serve` may send. The first six bytes
// choose the image's size and the limits, the rest is the path after the identifier. Besides any trap (an overflow,
// an index out of range: a crashed server), it checks the specification's own rule that a canonical path is a
// request (parsed again and resolved against the same image and limits, it resolves to itself), and that a
// DeepZoom tile the pyramid has is a request for exactly that tile.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count >= 6 else { return 0 }
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let (w, h) = (Int(bytes[0]) << 8 | Int(bytes[1]), Int(bytes[2]) << 8 | Int(bytes[3]))
    // Up to 65535, or up to about 16.7 million a side (a 2^48-pixel image's arithmetic).
    let width = bytes[4] & 1 == 0 ? max(1, w) : max(1, w) << 8
    let height = bytes[4] & 2 == 0 ? max(1, h) : max(1, h) << 8
    let limits = bytes[5] & 1 == 0 ? ImageRequest.Limits.default : ImageRequest.Limits(maxWidth: nil, maxHeight: nil, maxArea: nil)
    let path = String(decoding: bytes[6...], as: UTF8.self)
    // A DeepZoom tile's two segments (`{level}/{column}_{row}.{format}`): a tile the pyramid has is a
    // request that resolves, and whose stored tile is found (the one whose region and size it asks for:
    // a corner tile of a few pixels may be the same region at the same size on two levels).
    let parts = path.split(separator: "/", omittingEmptySubsequences: false)
    if parts.count == 2, let address = DeepZoomTileAddress(level: parts[0], tile: parts[1]),
        let layout = try? PyramidLayout(width: width, height: height), let tile = layout.tile(address)
    {
        guard let resolved = try? layout.iiifRequest(of: tile, format: address.format).resolve(width: width, height: height, limits: limits),
            let found = layout.tile(exactly: resolved), layout.region(of: found) == layout.region(of: tile),
            layout.pixelSize(of: found) == layout.pixelSize(of: tile)
        else { fatalError("the DeepZoom tile \(path) of \(width)x\(height) is not a request whose stored tile is found") }
    }
    for request in [try? ImageRequest(path: path), try? ImageRequest(version2Path: path)] {
        guard let request, let resolved = try? request.resolve(width: width, height: height, limits: limits) else { continue }
        let canonical = resolved.canonicalPath
        guard let again = try? ImageRequest(path: canonical).resolve(width: width, height: height, limits: limits),
            again.canonicalPath == canonical
        else { fatalError("\(path) resolves to the canonical \(canonical), which does not resolve to itself") }
    }
    return 0
}
