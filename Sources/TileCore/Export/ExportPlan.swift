import Foundation

/// The files of one export: its levels (full size down to 1x1 pixel, each half the one above,
/// rounded up), the path of each tile, and the document that describes them.
///
/// Paths are relative to the folder the export is written in. Levels are indexed as a
/// ``TiledImage``'s are (0 is full size); DeepZoom numbers them the other way round.
struct ExportPlan: Sendable {
    let options: ExportOptions
    let name: String
    /// The tiles' levels and addresses: full size down to 1x1.
    let layout: PyramidLayout
    /// Level sizes, full size first, down to 1x1.
    let levels: [(width: Int, height: Int)]

    var width: Int { layout.width }
    var height: Int { layout.height }

    /// - Throws: ``TileError/Code/invalidArgument`` for a name that is not a plain file name, or
    ///   options out of range.
    init(name: String, width: Int, height: Int, options: ExportOptions) throws(TileError) {
        try options.validate()
        guard !name.isEmpty, !name.hasPrefix("."), !name.contains("/"), !name.contains("\0"), name.utf8.count <= 200
        else { throw TileError(.invalidArgument, "\"\(name)\" cannot name an export: a plain file name is needed") }
        guard width > 0, height > 0 else { throw TileError(.invalidArgument, "cannot export a \(width)x\(height) image") }
        self.name = name
        self.options = options
        let layout = try PyramidLayout(width: width, height: height, tileSize: options.tileSize)
        self.layout = layout
        levels = (0..<layout.levelCount).map { layout.size(ofLevel: $0) }
    }

    func columns(_ level: Int) -> Int { layout.grid(ofLevel: level).columns }
    func rows(_ level: Int) -> Int { layout.grid(ofLevel: level).rows }
    var tileCount: Int { levels.indices.reduce(0) { $0 + columns($1) * rows($1) } }

    private var format: ImageRequest.Format {
        switch options.format {
        case .jpeg: .jpg
        case .png: .png
        }
    }

    /// What is published, in this order (the descriptor last, so that a viewer that finds it finds
    /// every tile).
    var publishedNames: [String] {
        switch options.layout {
        case .deepZoom: ["\(name)_files", "\(name).dzi"]
        case .iiif3: [name]
        }
    }

    /// Folders to create before any tile is written.
    var folders: [String] {
        switch options.layout {
        case .deepZoom: ["\(name)_files"] + levels.indices.map { "\(name)_files/\(levels.count - 1 - $0)" }
        case .iiif3: [name]
        }
    }

    /// Where tile (column, row) of `level` is written: one path, or for IIIF tiles that show the
    /// whole image also its `full` forms.
    func tilePaths(level: Int, column: Int, row: Int) -> [String] {
        let tile = PyramidLayout.Tile(level: level, column: column, row: row)
        switch options.layout {
        case .deepZoom:
            return ["\(name)_files/" + layout.deepZoomAddress(of: tile, format: format).path]
        case .iiif3:
            let region = layout.region(of: tile), size = layout.pixelSize(of: tile)
            var paths: [String] = []
            if level <= layout.firstSingleTileLevel { paths.append("\(name)/" + layout.iiifRequest(of: tile, format: format).path) }
            if region.width == width && region.height == height {
                let full = ImageRequest(size: .exactly(width: size.width, height: size.height), format: format)
                paths.append("\(name)/" + full.path)
                if level == 0 { paths.append("\(name)/" + ImageRequest(format: format).path) }
            }
            return paths
        }
    }

    /// The documents, written before publishing: `NAME.dzi`; or `NAME/info.json`, the Presentation 3.0
    /// manifest `NAME/manifest.json` (one canvas painted by the export's level-0 service, ids under
    /// the base URL) and the viewer page `NAME/index.html` (``ViewerPageTemplate`` over `info.json`
    /// beside it: a plain file server is enough).
    func documents() -> [(path: String, contents: Data)] {
        switch options.layout {
        case .deepZoom:
            return [("\(name).dzi", Data(layout.deepZoomDescriptor(format: format, overlap: options.overlap).xml.utf8))]
        case .iiif3(let baseURL):
            let base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
            // The name as one path segment of a URI (a space, #, % or ? in it escaped).
            let segment = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? name
            let service = "\(base)/\(segment)"
            let info = layout.iiifInformation(id: service, profile: "level0")
            let page = IIIFManifest.Page(label: name, service: service, layout: layout, format: format, staticFiles: true)
            let manifest = IIIFManifest(id: "\(service)/manifest.json", label: name, pages: [page])
            let title = name.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            let viewer = ViewerPageTemplate.html(title: title, id: "", base: ".", format: format, live: false, nonce: "")
            return [
                ("\(name)/manifest.json", manifest.encoded(version: .v3, pretty: true) + Data("\n".utf8)),
                ("\(name)/index.html", Data(viewer.utf8)),
                ("\(name)/info.json", info.encoded(pretty: true) + Data("\n".utf8))
            ]
        }
    }
}
