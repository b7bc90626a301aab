/// One of the eight EXIF orientations: how the stored pixels must be turned to stand upright.
///
/// The raw values are EXIF's (tag 0x0112). `rotate90` (6) means the stored image must turn 90 degrees
/// clockwise to be upright; `rotate270` (8) counter-clockwise.
public enum ImageOrientation: Int, Sendable, Hashable, CaseIterable, Codable {
    /// 1: stored upright.
    case identity = 1
    /// 2: mirrored left to right.
    case flipHorizontal = 2
    /// 3: turned 180 degrees.
    case rotate180 = 3
    /// 4: mirrored top to bottom.
    case flipVertical = 4
    /// 5: mirrored about the main diagonal.
    case transpose = 5
    /// 6: turn 90 degrees clockwise to display.
    case rotate90 = 6
    /// 7: mirrored about the anti-diagonal.
    case transverse = 7
    /// 8: turn 90 degrees counter-clockwise to display.
    case rotate270 = 8

    /// Whether display width is the stored height (orientations 5 to 8).
    public var swapsAxes: Bool { rawValue >= 5 }

    /// Whether the stored x axis runs right to left in the display.
    var flipsStoredX: Bool { self == .flipHorizontal || self == .rotate180 || self == .transverse || self == .rotate270 }
    /// Whether the stored y axis runs bottom to top in the display.
    var flipsStoredY: Bool { self == .rotate180 || self == .flipVertical || self == .rotate90 || self == .transverse }

    /// The stored position of display position (i, j) in a stored grid `width` x `height`.
    @inline(__always)
    func storedPosition(ofDisplay i: Int, _ j: Int, width: Int, height: Int) -> (x: Int, y: Int) {
        switch self {
        case .identity: return (i, j)
        case .flipHorizontal: return (width - 1 - i, j)
        case .rotate180: return (width - 1 - i, height - 1 - j)
        case .flipVertical: return (i, height - 1 - j)
        case .transpose: return (j, i)
        case .rotate90: return (j, height - 1 - i)
        case .transverse: return (width - 1 - j, height - 1 - i)
        case .rotate270: return (width - 1 - j, i)
        }
    }
}

/// How a build chooses the orientation of its pyramid.
public enum OrientationOption: Sendable, Hashable {
    /// The EXIF Orientation tag's value (1 when absent or out of range). The default.
    case fromExif
    /// The pixels as stored (orientation 1), whatever the tag says.
    case none
    /// This orientation, whatever the tag says.
    case fixed(ImageOrientation)

    func resolve(exif: Int?) -> ImageOrientation {
        switch self {
        case .fromExif: return exif.flatMap(ImageOrientation.init(rawValue:)) ?? .identity
        case .none: return .identity
        case .fixed(let orientation): return orientation
        }
    }
}
