import Testing
@testable import TileServer

@Suite("The encoded-tile cache's admission of tiles asked for again")
struct EncodedTileCacheTests {
    @Test("a key is repeated from its second question on; a cache that keeps nothing never says so")
    func repeated() {
        let cache = EncodedTileCache()
        #expect(!cache.isRepeated("/dzi/a_files/11/0_0.jpg"))
        #expect(cache.isRepeated("/dzi/a_files/11/0_0.jpg") && cache.isRepeated("/dzi/a_files/11/0_0.jpg"))
        #expect(!cache.isRepeated("/dzi/a_files/11/1_0.jpg"))
        let none = EncodedTileCache(capacity: 0)
        #expect(!none.isRepeated("/x") && !none.isRepeated("/x"))
    }

    @Test("what was seen once is forgotten after many other keys (a scan does not leave a record without bound)")
    func forgetting() {
        // 64 MiB: each of the 16 shards remembers 512 keys; 100,000 keys put thousands through each.
        let cache = EncodedTileCache(capacity: 64 << 20)
        #expect(!cache.isRepeated("first"))
        for i in 0..<100_000 { _ = cache.isRepeated("key \(i)") }
        #expect(!cache.isRepeated("first"))
    }
}
