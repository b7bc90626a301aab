// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "TiledImageKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "TileCore", targets: ["TileCore"]),
        .library(name: "TileActors", targets: ["TileActors"]),
        .executable(name: "tiler", targets: ["tiler"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        .systemLibrary(
            name: "CLibJPEG",
            pkgConfig: "libjpeg",
            providers: [.apt(["libjpeg62-turbo-dev"])]
        ),
        .target(
            name: "CJpegShim",
            dependencies: ["CLibJPEG"],
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(name: "TileCore", dependencies: ["CJpegShim"], swiftSettings: swiftSettings),
        .target(name: "TileActors", dependencies: ["TileCore"], swiftSettings: swiftSettings),
        .testTarget(name: "TileActorsTests", dependencies: ["TileActors", "TileCore"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "tiler",
            dependencies: [
                "TileCore", "TileActors",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "Benchmarks",
            dependencies: ["TileCore", "TileActors", "CJpegShim"],
            path: "Benchmarks/Benchmarks",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TileCoreTests",
            dependencies: ["TileCore", "CJpegShim"],
            swiftSettings: swiftSettings
        ),
    ]
)
