import Foundation

/// The files of one export: its levels (full size down to 1x1 pixel, each half the one above,
/// rounded up), the path of each tile, and the document that describes them.
///
/// Paths are relative to the folder the export is written in. Levels are indexed as a
/// ``TiledImage``'s are (0 is full size); DeepZoom numbers them the other way round.
struct ExportPlan: Sendable {
    let options: ExportOptions
    let name: String
    /// Level sizes, full size first, down to 1x1.
    let levels: [(width: Int, height: Int)]

    var width: Int { levels[0].width }
    var height: Int { levels[0].height }

    /// - Throws: ``TileError/Code/invalidArgument`` for a name that is not a plain file name, or
    ///   options out of range.
    init(name: String, width: Int, height: Int, options: ExportOptions) throws(TileError) {
        try options.validate()
        guard !name.isEmpty, !name.hasPrefix("."), !name.contains("/"), !name.contains("\0"), name.utf8.count <= 200
        else { throw TileError(.invalidArgument, "\"\(name)\" cannot name an export: a plain file name is needed") }
        guard width > 0, height > 0 else { throw TileError(.invalidArgument, "cannot export a \(width)x\(height) image") }
        self.name = name
        self.options = options
        var levels = [(width, height)]
        while levels.last!.0 > 1 || levels.last!.1 > 1 {
            let (w, h) = levels.last!
            levels.append(((w + 1) / 2, (h + 1) / 2))
        }
        self.levels = levels
    }

    func columns(_ level: Int) -> Int { (levels[level].width + options.tileSize - 1) / options.tileSize }
    func rows(_ level: Int) -> Int { (levels[level].height + options.tileSize - 1) / options.tileSize }
    var tileCount: Int { levels.indices.reduce(0) { $0 + columns($1) * rows($1) } }

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

    /// The first level that fits in one tile: IIIF's scale factors stop there, smaller levels are
    /// only whole-image sizes.
    var firstSingleTileLevel: Int {
        levels.firstIndex { $0.width <= options.tileSize && $0.height <= options.tileSize } ?? levels.count - 1
    }

    /// Where tile (column, row) of `level` is written: one path, or for IIIF tiles that show the
    /// whole image also its `full` forms.
    func tilePaths(level: Int, column: Int, row: Int) -> [String] {
        let suffix = options.format.fileExtension
        switch options.layout {
        case .deepZoom:
            return ["\(name)_files/\(levels.count - 1 - level)/\(column)_\(row).\(suffix)"]
        case .iiif3:
            let t = options.tileSize, scale = 1 << level
            let x = column * t * scale, y = row * t * scale
            let w = min(t * scale, width - x), h = min(t * scale, height - y)
            let sw = min(t, levels[level].width - column * t), sh = min(t, levels[level].height - row * t)
            var paths: [String] = []
            if level <= firstSingleTileLevel { paths.append("\(name)/\(x),\(y),\(w),\(h)/\(sw),\(sh)/0/default.\(suffix)") }
            if w == width && h == height {
                paths.append("\(name)/full/\(sw),\(sh)/0/default.\(suffix)")
                if level == 0 { paths.append("\(name)/full/max/0/default.\(suffix)") }
            }
            return paths
        }
    }

    /// The descriptor: `NAME.dzi`, or `NAME/info.json`.
    func descriptor() throws(TileError) -> (path: String, contents: Data) {
        switch options.layout {
        case .deepZoom:
            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <Image xmlns="http://schemas.microsoft.com/deepzoom/2008" Format="\(options.format.fileExtension)" \
                Overlap="\(options.overlap)" TileSize="\(options.tileSize)">
                  <Size Height="\(height)" Width="\(width)"/>
                </Image>

                """
            return ("\(name).dzi", Data(xml.utf8))
        case .iiif3(let baseURL):
            let base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
            let sizes = levels[firstSingleTileLevel...].reversed().map { ["width": $0.width, "height": $0.height] }
            let info: [String: Any] = [
                "@context": "http://iiif.io/api/image/3/context.json",
                "id": "\(base)/\(name)", "type": "ImageService3", "protocol": "http://iiif.io/api/image",
                "profile": "level0", "width": width, "height": height, "sizes": sizes,
                "tiles": [["width": options.tileSize, "scaleFactors": (0...firstSingleTileLevel).map { 1 << $0 }]],
            ]
            do {
                let data = try JSONSerialization.data(
                    withJSONObject: info, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                return ("\(name)/info.json", data + Data("\n".utf8))
            } catch {
                throw TileError(.invalidArgument, "cannot write info.json: \(error)")
            }
        }
    }
}
