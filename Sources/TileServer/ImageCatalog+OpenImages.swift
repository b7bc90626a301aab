import TileActors
import TileCore

extension ImageCatalog {
    /// Cache stores open past ``maximumOpenImages`` closed, least recently used first (the budget may
    /// then evict them).
    func closeLeastRecentlyUsed() async {
        let open = states.compactMap { id, state -> (String, DiskCacheBudget.StoreID, SourceFingerprint?)? in
            if case .ready(let image, let storeID?) = state { return (id, storeID, image.fingerprint) }
            return nil
        }
        guard open.count > maximumOpenImages else { return }
        let stores = Dictionary(uniqueKeysWithValues: open.map { ($0.0, ($0.1, $0.2)) })
        for id in uses.oldestFirst(stores.keys).prefix(open.count - maximumOpenImages) {
            let (storeID, fingerprint) = stores[id]!
            states[id] = .closed(storeID, fingerprint)
            forgetReady(id)
            await budget.close(storeID)  // evicts what the budget then allows
        }
    }

    /// A closed cache store opened again (on the thread pool); false (and forgotten) when the budget
    /// has evicted it or it cannot be opened.
    func reopen(_ id: String, _ storeID: DiskCacheBudget.StoreID, _ fingerprint: SourceFingerprint?) async -> Bool {
        guard let path = await budget.checkOut(storeID) else {
            states[id] = nil
            return false
        }
        storesOpened += 1
        if let pyramid = try? await threadPool.blocking({ () throws(TileError) in try TiledImage.open(store: path) }) {
            setReady(Image(id: id, pyramid: pyramid, fingerprint: fingerprint), storeID: storeID)
            return true
        }
        // Out of the accounts, so that its entry cannot be evicted under a store built again at the path.
        await budget.close(storeID)
        await budget.unregister(storeID)
        states[id] = nil
        return false
    }
}
