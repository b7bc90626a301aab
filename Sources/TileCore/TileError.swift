/// The error every TileCore operation throws: a stable ``Code`` to test against, a message that says
/// what went wrong, and the underlying cause where there is one (an errno, libjpeg's message code).
public struct TileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable error code. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case truncated, corrupt, unsupported, tooLarge, io, cancelled, notReady, invalidArgument, invalidStore
            case tooManyScans, tooManyWarnings, overBudget
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The input ended before the image did (a download cut short, an empty file), or a scan's data
        /// ended early with a marker after it (a cut file with an end-of-image marker appended).
        public static let truncated = Code(.truncated)
        /// The bytes are not a valid JPEG, or libjpeg gave up on them; the message is libjpeg's.
        public static let corrupt = Code(.corrupt)
        /// A valid JPEG this build cannot decode (12-bit samples, lossless, ...).
        public static let unsupported = Code(.unsupported)
        /// The image is larger than the configured pixel limit (or libjpeg's 65500-pixel side).
        public static let tooLarge = Code(.tooLarge)
        /// The stream has more scans than ``BuildOptions/maximumScanCount`` allows (a scan flood).
        public static let tooManyScans = Code(.tooManyScans)
        /// The stream gave more corrupt-data warnings than ``BuildOptions/warningLimit`` allows.
        public static let tooManyWarnings = Code(.tooManyWarnings)
        /// The store a build makes does not fit the disk budget it is counted in (a
        /// `DiskCacheBudget`), even after unused stores are evicted: refused before it is written, or
        /// stopped when it writes past what fits.
        public static let overBudget = Code(.overBudget)
        /// A system call failed; ``TileError/errno`` holds its errno.
        public static let io = Code(.io)
        /// The build was cancelled.
        public static let cancelled = Code(.cancelled)
        /// A tile was read before its tile row was complete.
        public static let notReady = Code(.notReady)
        /// An argument is out of range (a level, a tile coordinate, a buffer too small).
        public static let invalidArgument = Code(.invalidArgument)
        /// A store folder is missing, incomplete or of another format.
        public static let invalidStore = Code(.invalidStore)

        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A sentence that says what went wrong and where.
    public var message: String
    /// The errno of a failed system call (``Code/io``), else `nil`.
    public var errno: Int32?
    /// libjpeg's message code for decoder errors, else `nil`.
    public var libjpegMessageCode: Int?
    /// Whether the input ended inside a JPEG's scan data, which ``BuildOptions/allowTruncated`` fills
    /// in (`tiler build --allow-truncated`): never for other formats or a cut header.
    public var isFillable = false

    /// Creates an error.
    public init(_ code: Code, _ message: String, errno: Int32? = nil, libjpegMessageCode: Int? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.libjpegMessageCode = libjpegMessageCode
    }

    public var description: String { "\(code): \(message)" }
}
