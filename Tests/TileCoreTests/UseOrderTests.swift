import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// The caches' one recency rule against a plain list: a use moves a key to the end, a removal drops it.
@Suite("UseOrder", .ownThreads)
struct UseOrderTests {
    @Test("oldest first, as a list that moves each used key to its end says, over 5,000 random uses and removals")
    func againstAList() {
        var generator = SplitMix(seed: 42)
        var order = UseOrder<Int>()
        var list: [Int] = []  // least recently used first
        for _ in 0..<5_000 {
            let key = Int.random(in: 0..<40, using: &generator)
            if Int.random(in: 0..<5, using: &generator) == 0 {
                order.remove(key)
                list.removeAll { $0 == key }
            } else {
                order.use(key)
                list.removeAll { $0 == key }
                list.append(key)
            }
            #expect(order.count == list.count)
        }
        #expect(order.oldestFirst(list.shuffled(using: &generator)) == list)
        #expect(order.oldest(of: list.reversed()) == list.first)
        // A key never used (or removed) comes before every used one.
        let unknown = 1_000
        #expect(order.oldestFirst([unknown] + list).first == unknown)
        order.removeAll { $0 % 2 == 0 }
        #expect(order.oldestFirst(list.filter { $0 % 2 == 1 }) == list.filter { $0 % 2 == 1 })
        #expect(order.count == list.filter { $0 % 2 == 1 }.count)
    }
}
