import TileActors
import TileCore

extension ImageCatalog {
    /// Cache stores open past ``maximumOpenImages`` closed, least recently used first (the budget may
    /// then evict them).
    func closeLeastRecentlyUsed() async {
        // Names and uses only: a copy of an entry would keep its pyramid, which the budget evicts only once released.
        let open = entries.compactMap { id, entry in if case .ready(_, _?) = entry.phase { (id, entry.lastUse) } else { nil } }
        guard open.count > maximumOpenImages else { return }
        for (id, _) in open.sorted(by: { $0.1 < $1.1 }).prefix(open.count - maximumOpenImages) {
            _ = await perform(apply(.closedToSaveRoom, to: id), for: id)
        }
    }

    /// A closed cache store opened again (on the thread pool); false (and forgotten) when the budget
    /// has evicted it or it cannot be opened.
    func reopen(_ id: String, _ storeID: DiskCacheBudget.StoreID, _ fingerprint: SourceFingerprint?) async -> Bool {
        guard let path = await budget.checkOut(storeID) else {
            apply(.forgotten, to: id)
            return false
        }
        storesOpened += 1
        if let pyramid = try? await threadPool.blocking({ () throws(TileError) in try TiledImage.open(store: path) }) {
            apply(.opened(Image(id: id, pyramid: pyramid, fingerprint: fingerprint), storeID: storeID), to: id)
            return true
        }
        // Out of the accounts, so that its entry cannot be evicted under a store built again at the path.
        await budget.close(storeID)
        await budget.unregister(storeID)
        apply(.forgotten, to: id)
        return false
    }
}
