// libFuzzer target for the header walk and the EXIF reader (TileCore's Swift sources, compiled in).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let segments = HeaderSegments.parse(bytes)
    _ = segments.iccProfile
    _ = try? ImageInfo(segments: segments)
    _ = EXIFReader(Array(bytes))  // the bytes as a bare TIFF block too
    return 0
}
