// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility")
]

let package = Package(
    name: "TiledImageKit",
    products: [
        .library(name: "TileCore", targets: ["TileCore"]),
        .library(name: "TileActors", targets: ["TileActors"]),
        .library(name: "TileNetwork", targets: ["TileNetwork"]),
        .library(name: "TileServer", targets: ["TileServer"]),
        .executable(name: "tiler", targets: ["tiler"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // Bcrypt (its C implementation alone): the password hashes of restricted images' users.
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.34.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        // `swift package generate-documentation --target TileCore` (the DocC catalogs in Sources/*/*.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0")
    ],
    targets: [
        .systemLibrary(
            name: "CLibJPEG",
            pkgConfig: "libjpeg",
            providers: [.apt(["libjpeg62-turbo-dev"])]
        ),
        .systemLibrary(
            name: "CLibPNG",
            pkgConfig: "libpng",
            providers: [.apt(["libpng-dev"])]
        ),
        // libtiff: the container of tiled pyramidal TIFF stores (written and read by CJpegShim).
        .systemLibrary(
            name: "CLibTIFF",
            pkgConfig: "libtiff-4",
            providers: [.apt(["libtiff-dev"])]
        ),
        // OpenJPEG: JPEG 2000 masters.
        .systemLibrary(
            name: "CLibOpenJPEG",
            pkgConfig: "libopenjp2",
            providers: [.apt(["libopenjp2-7-dev"])]
        ),
        // libwebp and libavif: WebP and AVIF answers (encoded by CWebEncoders).
        .systemLibrary(
            name: "CLibWebP",
            pkgConfig: "libwebpmux",
            providers: [.apt(["libwebp-dev"])]
        ),
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // (No pkgConfig: libavif's .pc adds -DAVIF_DLL, a flag SwiftPM refuses; the headers are in /usr/include.)
        .systemLibrary(
            name: "CLibAVIF",
            providers: [.apt(["libavif-dev"])]
        ),
        // libtiff over a descriptor: client procedures and message handlers the TIFF writer, the
        // pyramid reader and the master decoder share.
        .target(name: "CTiffIO", dependencies: ["CLibTIFF"]),
        .target(
            name: "CJpegShim",
            dependencies: ["CLibJPEG", "CLibPNG", "CLibTIFF", "CTiffIO", "CLibWebP", "CWebEncoders"],
            cSettings: [.define("_GNU_SOURCE")]
        ),
        // RGBA pixels to WebP and AVIF, one image a call (TileCore's RGBAPixels.encoded(as:)).
        .target(name: "CWebEncoders", dependencies: ["CLibWebP", "CLibAVIF"], linkerSettings: [.linkedLibrary("avif")]),
        // Anonymous spool files: the one maker, for the master decoders and TileCore's MasterFile.
        .target(name: "CSpool", cSettings: [.define("_GNU_SOURCE")]),
        // PNG masters: libpng's progressive reader behind a push decoder of RGBA rows (TileCore's PNGDecoder).
        .target(name: "CPngDecoder", dependencies: ["CLibPNG", "CSpool"], cSettings: [.define("_GNU_SOURCE")]),
        // TIFF masters: libtiff's strip, scanline and tile reads behind a decoder of RGBA rows (TileCore's TIFFDecoder).
        .target(name: "CTiffDecoder", dependencies: ["CLibTIFF", "CTiffIO", "CSpool"], cSettings: [.define("_GNU_SOURCE")]),
        // JPEG 2000 masters: OpenJPEG's windowed decode behind a decoder of RGBA rows (TileCore's JPEG2000Decoder).
        .target(name: "CJp2Decoder", dependencies: ["CLibOpenJPEG", "CSpool"], cSettings: [.define("_GNU_SOURCE")]),
        // libjpeg's ordinary whole-image decode, for tests and benchmarks to compare with: not shipped.
        .target(name: "CJpegReference", dependencies: ["CLibJPEG", "CLibPNG"]),
        .target(
            name: "TileCore",
            dependencies: [
                "CJpegShim", "CPngDecoder", "CTiffDecoder", "CJp2Decoder", "CSpool", "CWebEncoders",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TileActors",
            dependencies: [
                "TileCore", .product(name: "Logging", package: "swift-log"), .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TileActorsTests",
            dependencies: [
                "TileActors", "TileCore", "TestSupport", "TestTraits", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio")
            ],
            swiftSettings: swiftSettings),
        // What the test targets share: generated inputs, plain references, the corpus manifest.
        .target(
            name: "TestSupport", dependencies: ["TileCore", "CJpegReference"], path: "Tests/TestSupport",
            swiftSettings: swiftSettings),
        .target(
            name: "TileNetwork",
            dependencies: [
                "TileActors", "TileCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // ByteBufferView as ContiguousBytes: body parts go to the decoder without a copy.
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                // SHA-256 and HMAC for S3's request signatures (Signature Version 4), MD5 for entity tags.
                "CLibCrypto"
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TileNetworkTests",
            dependencies: [
                "TileNetwork", "TileActors", "TileCore", "TestSupport", "TestTraits",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        // IIIF and DeepZoom over HTTP (Hummingbird 2): a library a Swift server can mount, and `tiler serve`.
        .target(
            name: "TileServer",
            dependencies: [
                // TileNetwork: its HMAC-SHA-256 (libcrypto's) signs access sessions and tokens.
                "TileActors", "TileCore", "TileNetwork",
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TileServerTests",
            dependencies: [
                "TileServer", "TileNetwork", "TileActors", "TileCore", "TestSupport", "TestTraits",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client")
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tiler",
            dependencies: [
                "TileCore", "TileActors", "TileNetwork", "TileServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle")
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "TileCore", "TileActors", "TileNetwork", "TileServer", "CJpegShim", "CJpegReference", "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio")
            ],
            path: "Benchmarks/Benchmarks",
            swiftSettings: swiftSettings
        ),
        .target(name: "TestTraits", dependencies: ["TestSupport"], path: "Tests/TestTraits", swiftSettings: swiftSettings),
        .testTarget(
            name: "TilerTests",
            dependencies: [
                "tiler", "TileCore", "TileNetwork", "TestSupport", "TestTraits", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TileCoreTests",
            dependencies: [
                "TileCore", "CJpegShim", "CJpegReference", "TestSupport", "TestTraits", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        )
    ]
)
