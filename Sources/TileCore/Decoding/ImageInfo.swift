/// The file formats masters are read in, told from their first bytes.
public enum ImageFormat: String, Sendable, Hashable, Codable {
    /// JPEG 2000: a JP2 file or a bare J2K codestream.
    case jpeg, png, tiff, jpeg2000
}

/// What a master says about itself, read from its header only (a JPEG's header segments up to the
/// first SOS; a PNG's chunks before its first IDAT; a TIFF's directory), so its cost does not grow with
/// the file's size. Most fields describe a JPEG's coding; a PNG or a TIFF fills what applies
/// (``format``, size, components, ``bitsPerSample``, ``hasAlpha``, ``iccProfile``, ``density``; a
/// TIFF's `Orientation` as ``exifOrientation``, its storage in ``tiff``).
public struct ImageInfo: Sendable, Hashable {
    /// How the image is coded (the SOF marker).
    public enum Coding: String, Sendable, Hashable {
        case baseline, extendedSequential, progressive, lossless, unknown
    }

    /// The file's format.
    public var format: ImageFormat = .jpeg
    /// Stored size.
    public var width: Int
    public var height: Int
    /// Colour components, alpha not counted (1 gray, 3 colour, 4 CMYK).
    public var components: Int
    /// Whether the image has an alpha channel (a PNG's, or its `tRNS` transparency): kept in raw
    /// stores' RGBA tiles.
    public var hasAlpha = false
    public var colorSpace: JPEGHeader.ColorSpace
    public var bitsPerSample: Int
    public var coding: Coding
    public var isArithmetic: Bool
    /// "4:4:4", "4:2:2", "4:2:0", "4:4:0", "4:1:1", "4:1:0", "n/a" (one component), "none" (4
    /// components all alike) or "other".
    public var subsampling: String
    /// MCUs between restart markers (0: none).
    public var restartInterval: Int
    /// JFIF density: unit (0 none, 1 dpi, 2 dpcm), x, y.
    public var density: Density?
    /// The EXIF Orientation tag of IFD0, as stored (any value); `nil` when absent.
    public var exifOrientation: Int?
    /// The ICC profile, its APP2 chunks joined in order; `nil` when absent or incomplete.
    public var iccProfile: [UInt8]?
    /// The Adobe APP14 transform (0 none/CMYK, 1 YCbCr, 2 YCCK), when present.
    public var adobeTransform: Int?
    /// Tags of IFD0 and the Exif sub-IFD by name.
    public var exif: [String: EXIFValue]
    /// Why the EXIF block could not be read (wholly or in part), when it could not.
    public var exifProblem: String?
    /// Bytes of the file up to and including the first SOS marker.
    public var headerByteCount: Int
    /// The EXIF block (the TIFF structure after `Exif\0\0`), as stored.
    public var exifBlock: [UInt8]?
    /// A TIFF master's storage (nil for other formats). Its `Orientation` tag is ``exifOrientation``.
    public var tiff: TIFFDetails?
    /// How a JPEG 2000 master is coded.
    public var jpeg2000: JPEG2000Details?
    /// A PNG's `gAMA` chunk: the file gamma (about 0.45455 for data encoded for a 2.2 display), as
    /// stored; pixels are given as stored, not corrected.
    public var gamma: Double?
    /// A PNG's `sRGB` chunk: the rendering intent (0 perceptual, 1 relative colorimetric, 2
    /// saturation, 3 absolute colorimetric): the pixels are sRGB.
    public var sRGBIntent: Int?

    /// How a TIFF master is stored, as its directory says (codes are TIFF's own).
    public struct TIFFDetails: Sendable, Hashable {
        /// `Compression` (1 none, 5 LZW, 7 JPEG, 8 deflate, 32773 PackBits, ...).
        public var compression: Int
        /// `PhotometricInterpretation` (0 MinIsWhite, 1 MinIsBlack, 2 RGB, 3 palette, 5 CMYK, 6 YCbCr).
        public var photometric: Int
        /// Samples a pixel, extra samples (alpha) included.
        public var samplesPerPixel: Int
        public var isTiled: Bool
        /// `PlanarConfiguration` 2: each sample in a plane of its own.
        public var isPlanar: Bool
        public var isBigTIFF: Bool
        public var isBigEndian: Bool
        /// Whether the alpha is associated (premultiplied; undone in the pyramid's RGBA).
        public var alphaIsAssociated: Bool
        /// Pages: the directories of the file's main chain that are not reduced-resolution copies or
        /// transparency masks by their `NewSubfileType` (a pyramid's levels, previews), the first always
        /// (at most 4,096 directories looked at).
        public var pageCount: Int

        /// The compression's common name ("LZW", "deflate", ...), or its code.
        public var compressionName: String {
            let names = [
                1: "none", 2: "CCITT RLE", 3: "CCITT G3", 4: "CCITT G4", 5: "LZW", 6: "old JPEG", 7: "JPEG", 8: "deflate",
                32946: "deflate", 32773: "PackBits", 34925: "LZMA", 50000: "Zstandard", 50001: "WebP"
            ]
            return names[compression] ?? "compression \(compression)"
        }
    }

    /// How a JPEG 2000 master is coded, as its main header says.
    public struct JPEG2000Details: Sendable, Hashable {
        /// A bare J2K codestream rather than a JP2 (or JPH) file.
        public var isCodestream: Bool
        /// An HTJ2K codestream (ISO/IEC 15444-15, the high-throughput block coder), as its SIZ and CAP
        /// markers say: what `.jph` files and HTJ2K `.j2c` codestreams hold. Decoded a row of whole
        /// tiles at a time (OpenJPEG 2.5 fills HT code-blocks only for whole tiles); one whose row of
        /// tiles takes more than 512 MiB is refused when its rows are read.
        public var isHighThroughput: Bool
        /// The tiles' size on the reference grid (the image's size when it is one tile).
        public var tileWidth: Int
        public var tileHeight: Int
        public var tileCount: Int
        /// Resolution levels (decomposition levels + 1).
        public var resolutionLevels: Int
    }

    /// JFIF pixel density.
    public struct Density: Sendable, Hashable {
        public var unit: Int
        public var x: Int
        public var y: Int
    }

    /// The orientation the tag asks for (identity when absent or out of 1...8).
    public var orientation: ImageOrientation { exifOrientation.flatMap(ImageOrientation.init(rawValue:)) ?? .identity }
    /// Size once the orientation is applied.
    public var orientedWidth: Int { orientation.swapsAxes ? height : width }
    public var orientedHeight: Int { orientation.swapsAxes ? width : height }
    public var isProgressive: Bool { coding == .progressive }

    init(segments s: HeaderSegments) throws(TileError) {
        guard let frame = s.frame else {
            throw TileError(.corrupt, s.problem.map { "no frame header: \($0)" } ?? "no frame header (SOF) before the first scan")
        }
        width = frame.width
        height = frame.height
        components = frame.components.count
        bitsPerSample = frame.precision
        let kind = frame.marker & 0x03
        coding =
            kind == 0
            ? (frame.marker == 0xC0 ? .baseline : .extendedSequential)
            : kind == 2 ? .progressive : kind == 3 ? .lossless : .extendedSequential
        isArithmetic = frame.marker >= 0xC9
        restartInterval = s.restartInterval
        density = s.jfifDensity.map { Density(unit: $0.unit, x: $0.x, y: $0.y) }
        adobeTransform = s.adobeTransform
        iccProfile = s.iccProfile
        headerByteCount = s.headerByteCount
        colorSpace = Self.colorSpace(frame, jfif: s.jfifDensity != nil, adobe: s.adobeTransform)
        subsampling = Self.subsampling(frame)
        exif = [:]
        exifBlock = s.exif
        if let block = s.exif {
            let reader = EXIFReader(block)
            exif = reader.tags
            exifOrientation = reader.orientation
            exifProblem = reader.problem
        }
    }

    /// A PNG's header: `pixelsPerMetre` from `pHYs` (unit 1: metre, 0: an aspect ratio only).
    init(
        png width: Int, height: Int, bitDepth: Int, isGray: Bool, hasAlpha: Bool, iccProfile: [UInt8]?,
        pixelsPerMetre: (unit: Int, x: Int, y: Int)?
    ) {
        format = .png
        self.width = width
        self.height = height
        components = isGray ? 1 : 3
        self.hasAlpha = hasAlpha
        colorSpace = isGray ? .grayscale : .rgb
        bitsPerSample = bitDepth
        coding = .unknown
        isArithmetic = false
        subsampling = isGray ? "n/a" : "none"
        restartInterval = 0
        // pHYs in pixels a metre, as JFIF's dots a centimetre (unit 2).
        density = pixelsPerMetre.map { p in
            p.unit == 1 ? Density(unit: 2, x: (p.x + 50) / 100, y: (p.y + 50) / 100) : Density(unit: 0, x: p.x, y: p.y)
        }
        self.iccProfile = iccProfile
        exif = [:]
        headerByteCount = 0
    }

    /// The header as libjpeg read it, completed with the segments walked in Swift.
    init(header: JPEGHeader, segments: HeaderSegments) {
        if var info = try? ImageInfo(segments: segments) {
            info.colorSpace = header.colorSpace
            self = info
            return
        }
        width = header.width
        height = header.height
        components = header.components
        colorSpace = header.colorSpace
        bitsPerSample = header.bitsPerSample
        coding = header.isProgressive ? .progressive : .baseline
        isArithmetic = header.isArithmetic
        subsampling = "other"
        restartInterval = 0
        exif = [:]
        headerByteCount = 0
    }

    private static func colorSpace(_ f: HeaderSegments.Frame, jfif: Bool, adobe: Int?) -> JPEGHeader.ColorSpace {
        switch f.components.count {
        case 1: return .grayscale
        case 3:
            if jfif { return .ycbcr }
            if let adobe { return adobe == 0 ? .rgb : .ycbcr }
            return f.components.map(\.id) == [0x52, 0x47, 0x42] ? .rgb : .ycbcr
        case 4: return adobe == 2 ? .ycck : .cmyk
        default: return .unknown
        }
    }

    private static func subsampling(_ f: HeaderSegments.Frame) -> String {
        let c = f.components
        if c.count == 1 { return "n/a" }
        if c.count == 4 { return c.allSatisfy { $0.h == c[0].h && $0.v == c[0].v } ? "none" : "other" }
        guard c.count == 3, c[1].h == 1, c[1].v == 1, c[2].h == 1, c[2].v == 1 else { return "other" }
        let table = ["1x1": "4:4:4", "2x1": "4:2:2", "2x2": "4:2:0", "1x2": "4:4:0", "4x1": "4:1:1", "4x2": "4:1:0"]
        return table["\(c[0].h)x\(c[0].v)"] ?? "other"
    }
}
