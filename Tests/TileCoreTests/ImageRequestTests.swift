import Testing
import TestTraits
import TestSupport
import TileCore

/// IIIF Image API 3.0 requests, against the specification's own examples (sections 4.1 to 4.7; its
/// example image is 300x200: region `125,15,200,200` returns 175x185) and the tile arithmetic of its
/// implementation notes.
@Suite("IIIF image requests", .ownThreads)
struct ImageRequestTests {
    static func resolve(_ path: String, _ width: Int = 300, _ height: Int = 200, limits: ImageRequest.Limits = .init())
        throws -> ImageRequest.Resolved
    {
        try ImageRequest(path: path).resolve(width: width, height: height, limits: limits)
    }

    @Test(
        "regions: the examples of section 4.1",
        arguments: [
            ("full/max/0/default.jpg", [0, 0, 300, 200], "full"),
            ("square/max/0/default.jpg", [50, 0, 200, 200], "50,0,200,200"),
            ("125,15,120,140/max/0/default.jpg", [125, 15, 120, 140], "125,15,120,140"),
            ("pct:41.6,7.5,40,70/max/0/default.jpg", [125, 15, 120, 140], "125,15,120,140"),
            ("125,15,200,200/max/0/default.jpg", [125, 15, 175, 185], "125,15,175,185"),
            ("pct:41.6,7.5,66.6,100/max/0/default.jpg", [125, 15, 175, 185], "125,15,175,185"),
            ("0,0,300,200/max/0/default.jpg", [0, 0, 300, 200], "full")
        ])
    func regions(path: String, expected: [Int], canonical: String) throws {
        let r = try Self.resolve(path)
        #expect([r.x, r.y, r.width, r.height] == expected)
        #expect(r.canonicalPath == "\(canonical)/max/0/default.jpg")
    }

    @Test(
        "sizes: the examples of section 4.2",
        arguments: [
            ("full/max/0/default.jpg", ImageRequest.Limits(maxWidth: 200), 200, 133),
            ("full/^max/0/default.jpg", ImageRequest.Limits(maxWidth: 360), 360, 240),
            ("full/150,/0/default.jpg", .init(), 150, 100),
            ("full/^360,/0/default.jpg", .init(), 360, 240),
            ("full/,150/0/default.jpg", .init(), 225, 150),
            ("full/^,240/0/default.jpg", .init(), 360, 240),
            ("full/pct:50/0/default.jpg", .init(), 150, 100),
            ("full/^pct:120/0/default.jpg", .init(), 360, 240),
            ("full/225,100/0/default.jpg", .init(), 225, 100),
            ("full/^360,360/0/default.jpg", .init(), 360, 360),
            ("full/!225,100/0/default.jpg", .init(), 150, 100),
            ("full/^!360,360/0/default.jpg", .init(), 360, 240)
        ])
    func sizes(path: String, limits: ImageRequest.Limits, width: Int, height: Int) throws {
        let r = try Self.resolve(path, limits: limits)
        #expect(r.scaledWidth == width && r.scaledHeight == height)
        // Canonical: max when the maximum size was asked for, else w,h (^w,h when upscaled).
        let size = path.split(separator: "/")[1]
        let expected = size.hasSuffix("max") ? String(size) : (width > 300 || height > 200 ? "^" : "") + "\(width),\(height)"
        #expect(r.canonicalPath == "full/\(expected)/0/default.jpg")
        // The canonical form is itself a request for the same image.
        let again = try Self.resolve(r.canonicalPath, limits: limits)
        #expect(again == r)
    }

    @Test("sizes larger than the region need ^ (section 4.2), as do percentages over 100")
    func upscalingNeedsTheCaret() throws {
        for path in [
            "full/301,/0/default.jpg", "full/,201/0/default.jpg", "full/pct:120/0/default.jpg",
            "full/360,360/0/default.jpg", "125,15,120,140/121,/0/default.jpg"
        ] {
            #expect(thrownCode { try Self.resolve(path) } == .invalidArgument, "\(path)")
        }
        // !w,h never upscales without ^: it fits within the region.
        #expect(try Self.resolve("full/!600,600/0/default.jpg").scaledWidth == 300)
    }

    @Test("rotation and mirroring: the examples of section 4.3; other angles are not offered")
    func rotations() throws {
        let cases: [(String, Int, Bool, String, Int, Int)] = [
            ("0", 0, false, "0", 300, 200), ("180", 2, false, "180", 300, 200), ("90", 1, false, "90", 200, 300),
            ("!0", 0, true, "!0", 300, 200), ("!180", 2, true, "!180", 300, 200), ("270.0", 3, false, "270", 200, 300),
            ("360", 0, false, "360", 300, 200)
        ]
        for (text, turns, mirrored, canonical, w, h) in cases {
            let r = try Self.resolve("full/max/\(text)/default.jpg")
            #expect(r.quarterTurns == turns && r.mirrored == mirrored && r.outputWidth == w && r.outputHeight == h, "\(text)")
            #expect(r.canonicalPath == "full/max/\(canonical)/default.jpg")
        }
        #expect(thrownCode { try Self.resolve("full/max/22.5/default.png") } == .unsupported)
        #expect(thrownCode { try Self.resolve("full/max/361/default.jpg") } == .invalidArgument)
    }

    @Test("quality and format: sections 4.4 and 4.5")
    func qualitiesAndFormats() throws {
        #expect(try Self.resolve("full/max/0/gray.png").quality == .gray)
        #expect(try Self.resolve("full/max/0/color.jpg").canonicalPath == "full/max/0/color.jpg")
        #expect(ImageRequest.Format.png.mediaType == "image/png")
        #expect(try Self.resolve("full/max/0/bitonal.jpg").quality == .bitonal)
        for format in ["webp", "avif"] {
            #expect(try Self.resolve("full/max/0/default.\(format)").format.rawValue == format)
        }
        #expect(ImageRequest.Format.avif.mediaType == "image/avif" && ImageRequest.Format.webp.mediaType == "image/webp")
        for format in ["tif", "gif", "jp2", "pdf"] {
            #expect(thrownCode { try Self.resolve("full/max/0/default.\(format)") } == .unsupported, "\(format)")
        }
    }

    @Test("the example of section 4.6: region, then size, then mirroring and rotation, then quality")
    func orderOfImplementation() throws {
        let r = try ImageRequest(path: "125,15,120,140/90,/!270/gray.jpg").resolve(width: 300, height: 200)
        #expect([r.x, r.y, r.width, r.height] == [125, 15, 120, 140])
        #expect(r.scaledWidth == 90 && r.scaledHeight == 105)  // 90 * 140 / 120
        #expect(r.mirrored && r.quarterTurns == 3 && r.outputWidth == 105 && r.outputHeight == 90)
        #expect(r.canonicalPath == "125,15,120,140/90,105/!270/gray.jpg")
    }

    @Test(
        "tiles as the implementation notes compute them, edge tiles rounded up, resolve to themselves",
        arguments: [(1000, 700, 256), (6000, 4000, 512), (18000, 18000, 256), (257, 1, 256)])
    func tileArithmetic(width: Int, height: Int, tile: Int) throws {
        var scale = 1
        while true {
            for m in 0..<((height + tile * scale - 1) / (tile * scale)) {
                for n in 0..<((width + tile * scale - 1) / (tile * scale)) {
                    // The notes' Python, written out.
                    let xr = n * tile * scale, yr = m * tile * scale
                    let wr = xr + tile * scale > width ? width - xr : tile * scale
                    let hr = yr + tile * scale > height ? height - yr : tile * scale
                    let ws = xr + tile * scale > width ? (width - xr + scale - 1) / scale : tile
                    let hs = yr + tile * scale > height ? (height - yr + scale - 1) / scale : tile
                    let r = try Self.resolve("\(xr),\(yr),\(wr),\(hr)/\(ws),\(hs)/0/default.jpg", width, height, limits: .default)
                    #expect(r.scaledWidth == ws && r.scaledHeight == hs)
                    let region = xr == 0 && yr == 0 && wr == width && hr == height ? "full" : "\(xr),\(yr),\(wr),\(hr)"
                    #expect(r.canonicalPath == "\(region)/\(ws),\(hs)/0/default.jpg")
                }
            }
            if (width + scale - 1) / scale <= tile && (height + scale - 1) / scale <= tile { break }  // one tile
            scale *= 2
        }
    }

    @Test(
        "malformed requests give invalidArgument naming the parameter, never a trap",
        arguments: [
            "", "full", "full/max/0", "full/max/0/default.jpg/extra", "full//0/default.jpg", "/max/0/default.jpg",
            "1,2,3/max/0/default.jpg", "1,2,3,4,5/max/0/default.jpg", "-1,0,10,10/max/0/default.jpg", "+1,0,10,10/max/0/default.jpg",
            "1.5,0,10,10/max/0/default.jpg", "0,0,0,10/max/0/default.jpg", "pct:0,0,0,10/max/0/default.jpg",
            "pct:.5,0,10,10/max/0/default.jpg", "pct:1e2,0,10,10/max/0/default.jpg", "pct:1..2,0,10,10/max/0/default.jpg",
            "99999999999999999999,0,1,1/max/0/default.jpg", "full/0,/0/default.jpg", "full/,/0/default.jpg",
            "full/!100,/0/default.jpg", "full/pct:0/0/default.jpg", "full/pct:/0/default.jpg", "full/^^max/0/default.jpg",
            "full/,^240/0/default.jpg", "full/max/-90/default.jpg", "full/max/!!90/default.jpg", "full/max/9e1/default.jpg",
            "full/max/0/default", "full/max/0/.jpg", "full/max/0/best.jpg", "full/max/0/default.bmp", "full/max/0/default.JPG",
            "400,0,10,10/max/0/default.jpg", "0,300,10,10/max/0/default.jpg", "full/max/0/default.jpg\u{0}"
        ])
    func malformed(path: String) {
        let error = thrownError { try Self.resolve(path) }
        #expect(error?.code == .invalidArgument, "\(path): \(String(describing: error))")
        #expect(error.map { !$0.message.isEmpty } == true)
    }

    @Test("absurd numbers, from a path or from a caller, give an error or a bounded size, never a trap")
    func absurdNumbers() throws {
        let huge = "9223372036854775807"
        let cases: [(String, TileError.Code)] = [
            ("full/pct:\(huge)/0/default.jpg", .invalidArgument),  // larger than the region without ^
            ("full/^pct:\(huge)/0/default.jpg", .tooLarge),
            ("full/^\(huge.prefix(9)),/0/default.jpg", .tooLarge),
            ("pct:\(huge),0,10,10/max/0/default.jpg", .invalidArgument),  // outside the image
            ("full/^pct:0.00000000000000000000000000001/0/default.jpg", .invalidArgument)  // empty
        ]
        for (path, code) in cases {
            #expect(thrownCode { try Self.resolve(path, limits: .default) } == code, "\(path)")
        }
        // A region far past the image is cropped to it.
        let cropped = try Self.resolve("pct:0,0,9999999999999999999999999999999,9999999999999999999999999999999/max/0/default.jpg")
        #expect(cropped.width == 300 && cropped.height == 200)
        // Without limits, ^pct of 2^63 percent is refused, not a trap: past the largest side a request can
        // name, whatever the limits; so is an aspect ratio that gives one (found by request_fuzz: its
        // canonical form, `full/^1025536000,100150/...`, was not a request).
        #expect(thrownCode { try Self.resolve("full/^pct:\(huge)/0/default.jpg") } == .tooLarge)
        #expect(
            thrownCode { try ImageRequest(path: "full/^,100150/0/default.png").resolve(width: 10240, height: 1, limits: .init()) } == .tooLarge)
        let widest = try ImageRequest(path: "full/^,99999/0/default.png").resolve(width: 10000, height: 1, limits: .init())
        #expect(widest.scaledWidth == 999_990_000 && widest.canonicalPath == "full/^999990000,99999/0/default.png")
        // Values only a caller can give.
        for region in [ImageRequest.Region.percent(x: .nan, y: 0, width: 10, height: 10), .percent(x: 0, y: 0, width: .infinity, height: -.infinity)]
        {
            #expect(thrownCode { try ImageRequest(region: region).resolve(width: 300, height: 200) } == .invalidArgument)
        }
        #expect(thrownCode { try ImageRequest(size: .percent(.infinity), upscales: true).resolve(width: 300, height: 200) } == .invalidArgument)
        #expect(thrownCode { try ImageRequest(size: .percent(1e300), upscales: true).resolve(width: 300, height: 200) } == .tooLarge)
        #expect(thrownCode { try ImageRequest(size: .width(Int.max), upscales: true).resolve(width: 300, height: 200) } == .tooLarge)
        #expect(
            thrownCode { try ImageRequest(size: .exactly(width: Int.max, height: Int.max), upscales: true).resolve(width: 300, height: 200) }
                == .tooLarge)
        for rotation in [-90.0, 450, .nan, .infinity] {
            #expect(thrownCode { try ImageRequest(rotation: rotation).resolve(width: 300, height: 200) } != nil, "rotation \(rotation)")
        }
        let unlimited = ImageRequest.Limits(maxWidth: Int.max, maxHeight: Int.max, maxArea: Int.max)
        let max = try ImageRequest(size: .max, upscales: true).resolve(width: 300, height: 200, limits: unlimited)
        #expect(max.scaledWidth >= 300 && max.scaledHeight >= 200 && max.scaledWidth <= ImageRequest.largestSide)
    }

    @Test("20,000 random requests built from hostile pieces resolve or throw, never trap")
    func randomHostileRequests() {
        // A fixed-seed generator (xorshift), so that a failure can be replayed.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
        // Mostly numbers the parser takes (so that resolve sees extremes), some it refuses.
        let numbers = [
            "0", "1", "255", "256", "299", "300", "999999999", "100", "100.0", "0.5", "9223372036854775807",
            "99999999999999999999999999999999", "0.00000000000000000000000000000001", "90", "180", "270", "360"
        ]
        let refused = [
            "-1", "1000000000", "9223372036854775808", "-9223372036854775808", "1e308", "nan", "inf", "", "1.",
            ".1", "+1", "0x10"
        ]
        func number() -> String { next(8) == 0 ? refused[next(refused.count)] : numbers[next(numbers.count)] }
        func region() -> String {
            switch next(4) {
            case 0: return ["full", "square", "max", ""][next(4)]
            case 1: return "\(number()),\(number()),\(number()),\(number())"
            case 2: return "pct:\(number()),\(number()),\(number()),\(number())"
            default: return (0..<next(6)).map { _ in number() }.joined(separator: ",")
            }
        }
        func size() -> String {
            let up = next(2) == 0 ? "^" : ""
            switch next(6) {
            case 0: return up + ["max", "full", ""][next(3)]
            case 1: return up + "\(number()),"
            case 2: return up + ",\(number())"
            case 3: return up + "pct:\(number())"
            case 4: return up + "!\(number()),\(number())"
            default: return up + "\(number()),\(number())"
            }
        }
        let sizes = [(300, 200), (1, 1), (18000, 18000), (65500, 3), (3, 65500)]
        var resolved = 0
        for _ in 0..<20_000 {
            let rotation = (next(2) == 0 ? "!" : "") + number()
            let path =
                "\(region())/\(size())/\(rotation)/\(["default", "gray", "color", "bitonal", "default", "x"][next(6)]).\(["jpg", "png", "jpg", "webp"][next(4)])"
            let (width, height) = sizes[next(sizes.count)]
            let limits = next(2) == 0 ? ImageRequest.Limits.default : ImageRequest.Limits()
            if let request = try? ImageRequest(path: path), let result = try? request.resolve(width: width, height: height, limits: limits) {
                resolved += 1
                #expect(result.x >= 0 && result.y >= 0 && result.x + result.width <= width && result.y + result.height <= height, "\(path)")
                #expect(result.scaledWidth >= 1 && result.scaledHeight >= 1, "\(path)")
                // The specification's rule: the canonical form is a request, and resolves to itself.
                let again = try? ImageRequest(path: result.canonicalPath).resolve(width: width, height: height, limits: limits)
                #expect(again?.canonicalPath == result.canonicalPath, "\(path): \(result.canonicalPath)")
            }
        }
        #expect(resolved > 100, "the generator should also make valid requests (\(resolved))")
    }

    @Test("limits refuse oversize outputs before any work; max stays within them")
    func limits() throws {
        let limits = ImageRequest.Limits(maxWidth: 1000, maxArea: 500_000)
        #expect(thrownCode { try Self.resolve("full/1001,/0/default.jpg", 18000, 18000, limits: limits) } == .tooLarge)
        #expect(thrownCode { try Self.resolve("full/800,800/0/default.jpg", 18000, 18000, limits: limits) } == .tooLarge)
        let max = try Self.resolve("full/max/0/default.jpg", 18000, 9000, limits: limits)
        #expect(max.scaledWidth == 1000 && max.scaledHeight == 500)
        #expect(max.canonicalPath == "full/max/0/default.jpg")
        let area = try Self.resolve("full/max/0/default.jpg", 18000, 18000, limits: limits)
        #expect(area.scaledWidth * area.scaledHeight <= 500_000 && area.scaledWidth == area.scaledHeight)
        #expect(area.scaledWidth == 707)
    }
}
