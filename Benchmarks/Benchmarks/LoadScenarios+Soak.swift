import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

extension LoadScenarios {
    /// `serve-soak`: 256 connections for `seconds`, mixed requests (DeepZoom tiles of every level, IIIF
    /// regions at 256 pixels, info.json, and tiles of 8 JPEGs each built on its first request), and an
    /// upload (a build while it arrives) every 15 s. Reports errors, the server's peak RSS, and its open
    /// descriptors after warm-up and after the load (connections closed).
    static func soak(_ setup: Setup, jpeg: String, seconds: Int) async throws -> [String] {
        guard Scenario.which("wrk") != nil else { return ["serve-soak: skipped (needs wrk)"] }
        for i in 0..<8 where link(jpeg, "\(setup.images)/photo-\(i).jpg") != 0 {
            try FileManager.default.copyItem(atPath: jpeg, toPath: "\(setup.images)/photo-\(i).jpg")
        }
        let script = "\(setup.folder)/soak.lua"
        try soakScript(setup).write(toFile: script, atomically: false, encoding: .utf8)
        let (server, base) = try startServer(setup, uploads: true)
        defer { server.stop() }
        // Warm-up: a few seconds of the same mix, so that what is opened once (stores, caches) is open.
        _ = try WrkResult.run(url: base, connections: 32, seconds: 3, script: script, timeoutSeconds: 30)
        let descriptorsBefore = server.descriptorKinds
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let body = try Data(contentsOf: URL(fileURLWithPath: jpeg))
        let uploads = Task {
            var (count, failures) = (0, 0)
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(15))
                if Task.isCancelled { break }
                var request = HTTPClientRequest(url: "\(base)/images/upload-\(count)")
                request.method = .PUT
                request.headers.add(name: "Authorization", value: "Bearer bench")
                request.body = .bytes(ByteBuffer(bytes: body))
                let status = try? await client.execute(request, timeout: .seconds(60)).status.code
                if status != 201 { failures += 1 }
                count += 1
            }
            return (count, failures)
        }
        let sampler = Task {
            var rss: [Double] = []
            while !Task.isCancelled {
                rss.append(server.statusMiB("VmRSS"))
                try? await Task.sleep(for: .seconds(5))
            }
            return rss
        }
        let result = try await Task.detached {
            try WrkResult.run(url: base, connections: 256, seconds: seconds, script: script, timeoutSeconds: 30)
        }.value
        uploads.cancel()
        sampler.cancel()
        let (uploadCount, uploadFailures) = await uploads.value
        let samples = await sampler.value
        try await client.shutdown()
        try await Task.sleep(for: .seconds(2))  // connections closed by wrk's exit
        let descriptorsAfter = server.descriptorKinds
        return [
            String(
                format:
                    "serve-soak          %d s, 256 connections: %d requests (%.0f/s), p99 %.1f ms, max %.0f ms, errors %d; %d uploads (%d failed); "
                    + "server RSS peak %.0f MiB (samples %.0f-%.0f); descriptors before/after: sockets %d/%d, store level files %d/%d, others %d/%d",
                seconds, result.requests, result.requestsPerSecond, result.p99Milliseconds, result.maxMilliseconds, result.errors, uploadCount,
                uploadFailures, server.statusMiB("VmHWM"), samples.min() ?? .nan, samples.max() ?? .nan, descriptorsBefore.sockets,
                descriptorsAfter.sockets, descriptorsBefore.stores, descriptorsAfter.stores, descriptorsBefore.others, descriptorsAfter.others)
        ]
    }

    /// The soak's mix, chosen at random per request: 55% DeepZoom tiles of any level, 25% IIIF regions
    /// of 256 pixels, 10% info.json, 10% tiles of the JPEGs (their first requests start builds).
    static func soakScript(_ setup: Setup) -> String {
        """
        local top, columns, rows, width, height = \(setup.top), \(setup.columns), \(setup.rows), \(setup.columns * 256), \(setup.rows * 256)
        math.randomseed(7)
        request = function()
          local p = math.random(100)
          if p <= 55 then
            local level = math.random(top - 6, top)
            local s = 2 ^ (top - level)
            local c = math.random(0, math.max(0, math.ceil(columns / s) - 1))
            local r = math.random(0, math.max(0, math.ceil(rows / s) - 1))
            return wrk.format(nil, string.format("/dzi/photo_files/%d/%d_%d.jpg", level, c, r))
          elseif p <= 80 then
            local w = 256 * 2 ^ math.random(0, 5)
            local x, y = math.random(0, width - w - 256), math.random(0, height - w - 256)
            return wrk.format(nil, string.format("/iiif/3/photo/%d,%d,%d,%d/256,/0/default.jpg", x, y, w, w))
          elseif p <= 90 then
            local ids = {"photo", "photo-0", "photo-3", "photo-7"}
            return wrk.format(nil, "/iiif/3/" .. ids[math.random(#ids)] .. "/info.json")
          else
            local id = "photo-" .. math.random(0, 7)
            return wrk.format(nil, string.format("/iiif/3/%s/%d,%d,256,256/max/0/default.jpg", id, 256 * math.random(0, 10), 256 * math.random(0, 6)))
          end
        end

        """
    }
}
