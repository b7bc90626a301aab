import Foundation

/// The deep-zoom viewer page: one HTML file, no library, over a IIIF Image API 3.0 service's tiles
/// (its `info.json`'s `tiles`, at their canonical URIs). `tiler serve` shows it at `/view/{id}`, with
/// the build's progress while the image is built; a static IIIF export (`tiler export --layout iiif3`)
/// writes it as `NAME/index.html` beside `info.json`, where it needs nothing but a plain file server.
///
/// It fills the window with the image fitted; pans (drag, arrow keys) and zooms (wheel, pinch,
/// double-click, `+`/`-`) about the pointer; picks the level from the zoom and `devicePixelRatio`;
/// loads the visible tiles centre first, at most six at a time, dropping requests for tiles that left
/// the view; and draws the coarsest level under the finer ones as a placeholder. The view (centre in
/// image pixels, zoom in screen pixels per image pixel) lives in the URL fragment (`#x=…&y=…&z=…`).
/// On the server, a page of a multi-page master shows links to every page (from the book's manifest).
/// A restricted image (its info.json names an IIIF Auth 2.0 probe service) shows what the server gives
/// everyone and a login button, which goes through the access, token and probe services and shows
/// the full image once the probe says 200 (then a logout button).
public enum ViewerPageTemplate {
    /// The page.
    /// - Parameters:
    ///   - title: the page's title, already HTML-escaped.
    ///   - id: the image's identifier as it appears in URLs (the live page asks `../images/{id}`).
    ///   - base: the image service's URI relative to the page (`../iiif/3/{id}`, or `.` beside
    ///     `info.json`), already escaped for a JavaScript string.
    ///   - format: the tiles' format (`jpg`, `png`).
    ///   - live: whether the page follows a build's progress (`../images/{id}`).
    ///   - nonce: the script's and style's nonce for a content security policy (empty: none).
    public static func html(title: String, id: String, base: String, format: ImageRequest.Format, live: Bool, nonce: String) -> String {
        template.replacingOccurrences(of: "{{NAME}}", with: title).replacingOccurrences(of: "{{ID}}", with: id)
            .replacingOccurrences(of: "{{BASE}}", with: base).replacingOccurrences(of: "{{LIVE}}", with: live ? "true" : "false")
            .replacingOccurrences(of: "{{FORMAT}}", with: format.rawValue).replacingOccurrences(of: "{{NONCE}}", with: nonce)
    }

    private static let template = #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1, user-scalable=no">
        <title>{{NAME}}</title>
        <link rel="icon" href="data:,">
        <style nonce="{{NONCE}}">
        html,body{margin:0;height:100%;overflow:hidden;background:#222;color:#ddd;font:13px system-ui,sans-serif}
        #view{position:absolute;inset:0;overflow:hidden;touch-action:none;cursor:grab}
        #view.dragging{cursor:grabbing}
        #view img{position:absolute;display:block;user-select:none;-webkit-user-drag:none;pointer-events:none;image-rendering:auto}
        #status{position:absolute;z-index:2;left:8px;bottom:8px;background:rgba(0,0,0,.6);padding:3px 8px;border-radius:3px}
        #pages{position:absolute;z-index:2;right:8px;bottom:8px;background:rgba(0,0,0,.6);padding:3px 8px;border-radius:3px}
        #pages a{color:#aaa;margin:0 4px;text-decoration:none}#pages a.current{color:#fff;font-weight:bold}
        #auth{position:absolute;z-index:2;right:8px;top:8px;background:rgba(0,0,0,.75);padding:6px 10px;border-radius:3px;max-width:24em}
        #auth button{margin-left:8px}
        </style></head>
        <body><div id="view" tabindex="0"></div><div id="status">loading</div><div id="pages" hidden></div>
        <div id="auth" hidden><span id="auth-text"></span><button id="auth-button" type="button"></button></div>
        <script nonce="{{NONCE}}">
        "use strict";
        const ID = "{{ID}}", BASE = "{{BASE}}", LIVE = {{LIVE}}, EXT = "{{FORMAT}}", view = document.getElementById("view"), statusLine = document.getElementById("status");
        const MAX_IN_FLIGHT = 6;   // a browser's connections to a host; one is kept free while building
        let info = null, W = 0, H = 0, T = 256, scales = [1];
        let cx = 0, cy = 0, z = 1, minZ = 1, maxZ = 4;
        const tiles = new Map();   // key -> {img, level, c, r, state: "queued"|"loading"|"done"|"error"|"dropped", retryAt, waiting}
        let inFlight = 0, building = false, rowsWritten = 0, waiting = 0;   // waiting: requests for tiles not written yet

        function fit() { const s = Math.min(view.clientWidth / W, view.clientHeight / H); return s > 0 ? s : 1; }
        function clampView() {
          z = Math.min(maxZ, Math.max(minZ, z));
          const hw = view.clientWidth / (2 * z), hh = view.clientHeight / (2 * z);
          cx = W <= 2 * hw ? W / 2 : Math.min(W - hw, Math.max(hw, cx));
          cy = H <= 2 * hh ? H / 2 : Math.min(H - hh, Math.max(hh, cy));
        }
        function readHash() {
          const p = new URLSearchParams(location.hash.slice(1));
          const x = parseFloat(p.get("x")), y = parseFloat(p.get("y")), zz = parseFloat(p.get("z"));
          if (isFinite(x) && isFinite(y) && isFinite(zz) && zz > 0) { cx = x; cy = y; z = zz; return true; }
          return false;
        }
        let hashTimer = 0;
        function writeHash() {
          clearTimeout(hashTimer);
          hashTimer = setTimeout(() => {
            const h = "#x=" + cx.toFixed(1) + "&y=" + cy.toFixed(1) + "&z=" + z.toPrecision(5);
            if (location.hash !== h) history.replaceState(null, "", h);
          }, 100);
        }
        // The level whose pixels are closest to (and not coarser than) the screen's device pixels.
        function levelFor(zoom) {
          const density = zoom * (window.devicePixelRatio || 1);
          let k = 0;
          while (k + 1 < scales.length && scales[k + 1] * density <= 1) k++;
          return k;
        }
        function tileURL(k, c, r) {
          const s = scales[k], x = c * T * s, y = r * T * s, w = Math.min(T * s, W - x), h = Math.min(T * s, H - y);
          return BASE + "/" + x + "," + y + "," + w + "," + h + "/" + Math.ceil(w / s) + "," + Math.ceil(h / s) + "/0/default." + EXT;
        }
        function place(img, k, c, r) {
          const s = scales[k], x = c * T * s, y = r * T * s, w = Math.min(T * s, W - x), h = Math.min(T * s, H - y);
          const left = (x - cx) * z + view.clientWidth / 2, top = (y - cy) * z + view.clientHeight / 2;
          // Whole pixels on both edges, so neighbouring tiles meet without seams.
          const l = Math.round(left), t = Math.round(top);
          img.style.left = l + "px"; img.style.top = t + "px";
          img.style.width = (Math.round(left + w * z) - l) + "px"; img.style.height = (Math.round(top + h * z) - t) + "px";
        }
        function visible(k) {
          const s = scales[k], span = T * s, hw = view.clientWidth / (2 * z), hh = view.clientHeight / (2 * z);
          const c0 = Math.max(0, Math.floor((cx - hw) / span)), c1 = Math.min(Math.ceil(W / span) - 1, Math.floor((cx + hw) / span));
          const r0 = Math.max(0, Math.floor((cy - hh) / span)), r1 = Math.min(Math.ceil(H / span) - 1, Math.floor((cy + hh) / span));
          const list = [];
          for (let r = r0; r <= r1; r++) for (let c = c0; c <= c1; c++) {
            const dx = (c + 0.5) * span - cx, dy = (r + 0.5) * span - cy;
            list.push({k, c, r, d: dx * dx + dy * dy});
          }
          return list.sort((a, b) => a.d - b.d);   // centre first
        }
        function render() {
          if (!info) return;
          clampView();
          const k = levelFor(z), coarse = scales.length - 1;
          const wanted = new Set();
          for (const t of visible(coarse).concat(k === coarse ? [] : visible(k))) wanted.add(t.k + "/" + t.c + "/" + t.r);
          for (const [key, t] of tiles) {          // tiles that left the view: drop them (and their requests)
            if (!wanted.has(key)) { if (t.state === "loading") settled(t); t.state = "dropped"; t.img.removeAttribute("src"); t.img.remove(); tiles.delete(key); }
          }
          for (const key of wanted) {
            let t = tiles.get(key);
            if (!t) {
              const [tk, c, r] = key.split("/").map(Number);
              const img = new Image();
              img.style.zIndex = tk === coarse ? 0 : 1;
              img.dataset.key = key;
              t = {img, level: tk, c, r, state: "queued", retryAt: 0, waiting: false};
              tiles.set(key, t);
            }
            place(t.img, t.level, t.c, t.r);
          }
          pump(); writeHash();
        }
        // Whether the build has written the full-size rows under a tile (all of them once it is complete). The
        // rows are counted down the first column: for an image turned by its EXIF orientation only a guess,
        // and the one waiting request still shows the other tiles as they are written.
        function written(k, r) { return !building || Math.min(Math.ceil(H / T), (r + 1) * scales[k]) <= rowsWritten; }
        function settled(t) { inFlight--; if (t.waiting) { t.waiting = false; waiting--; } }
        function pump() {
          const now = performance.now(), k = levelFor(z), coarse = scales.length - 1;
          // The coarsest level is written last: while building, the one waiting request goes to the level shown.
          const order = k === coarse ? visible(coarse) : building ? visible(k).concat(visible(coarse)) : visible(coarse).concat(visible(k));
          for (const v of order) {
            if (inFlight >= MAX_IN_FLIGHT - (building ? 1 : 0)) break;
            const t = tiles.get(v.k + "/" + v.c + "/" + v.r);
            if (!t || !(t.state === "queued" || (t.state === "error" && now >= t.retryAt))) continue;
            const ready = written(t.level, t.r);
            if (!ready && waiting > 0) continue;
            t.state = "loading"; inFlight++; t.waiting = !ready; if (!ready) waiting++;
            t.img.onload = () => { if (t.state !== "loading") return; t.state = "done"; settled(t); if (!t.img.isConnected) view.appendChild(t.img); pump(); };
            t.img.onerror = () => { if (t.state !== "loading") return; t.state = "error"; t.retryAt = performance.now() + 1000; settled(t); pump(); setTimeout(pump, 1000); };
            t.img.src = tileURL(t.level, t.c, t.r);
          }
          // The tiles of the view not drawn yet, for whoever waits for the view to be whole (a test, a screenshot).
          let left = 0;
          for (const t of tiles.values()) if (t.state !== "done") left++;
          view.dataset.tilesLeft = left;
        }
        function zoomAbout(factor, sx, sy) {
          const ix = cx + (sx - view.clientWidth / 2) / z, iy = cy + (sy - view.clientHeight / 2) / z;
          const nz = Math.min(maxZ, Math.max(minZ, z * factor));
          cx = ix - (sx - view.clientWidth / 2) / nz; cy = iy - (sy - view.clientHeight / 2) / nz; z = nz;
          render();
        }
        const pointers = new Map();
        let pinch = 0;
        view.addEventListener("pointerdown", e => { view.setPointerCapture(e.pointerId); pointers.set(e.pointerId, {x: e.clientX, y: e.clientY}); view.classList.add("dragging"); view.focus(); });
        view.addEventListener("pointermove", e => {
          const p = pointers.get(e.pointerId); if (!p) return;
          if (pointers.size === 1) { cx -= (e.clientX - p.x) / z; cy -= (e.clientY - p.y) / z; p.x = e.clientX; p.y = e.clientY; render(); return; }
          p.x = e.clientX; p.y = e.clientY;
          const [a, b] = [...pointers.values()], d = Math.hypot(a.x - b.x, a.y - b.y);
          if (pinch > 0) zoomAbout(d / pinch, (a.x + b.x) / 2, (a.y + b.y) / 2);
          pinch = d;
        });
        const up = e => { pointers.delete(e.pointerId); pinch = 0; if (pointers.size === 0) view.classList.remove("dragging"); };
        view.addEventListener("pointerup", up); view.addEventListener("pointercancel", up);
        view.addEventListener("wheel", e => { e.preventDefault(); zoomAbout(Math.pow(2, -e.deltaY / 300), e.clientX, e.clientY); }, {passive: false});
        view.addEventListener("dblclick", e => zoomAbout(2, e.clientX, e.clientY));
        window.addEventListener("keydown", e => {
          const step = 100 / z;
          if (e.key === "+" || e.key === "=") zoomAbout(1.5, view.clientWidth / 2, view.clientHeight / 2);
          else if (e.key === "-") zoomAbout(1 / 1.5, view.clientWidth / 2, view.clientHeight / 2);
          else if (e.key === "ArrowLeft") { cx -= step; render(); } else if (e.key === "ArrowRight") { cx += step; render(); }
          else if (e.key === "ArrowUp") { cy -= step; render(); } else if (e.key === "ArrowDown") { cy += step; render(); }
          else return;
          e.preventDefault();
        });
        window.addEventListener("resize", () => { minZ = Math.min(fit(), 1); render(); });
        window.addEventListener("hashchange", () => { if (readHash()) render(); });
        async function progress() {
          try {
            const s = await (await fetch("../images/" + ID)).json();
            building = s.state === "building" || s.state === "not built";
            rowsWritten = s.tileRowsComplete || 0;
            statusLine.textContent = s.state === "ready" ? W + " x " + H
              : s.state === "failed" ? "failed: " + (s.error || "")
              : "building: " + s.tileRowsComplete + " tile rows, " + s.levelsComplete + " of " + s.levelCount + " levels";
            if (building) { for (const t of tiles.values()) if (t.state === "error") t.retryAt = 0; setTimeout(progress, 1000); }
            pump();
          } catch (e) { setTimeout(progress, 2000); }
        }
        // IIIF Authorization Flow 2.0, for an image whose info.json names a probe service: the probe with
        // the access token (none at first); on 401, what the server gives everyone (a degraded image, or
        // nothing) and a button that opens the access service's window; once it closes, the token
        // service in a hidden frame, whose message (from its origin, with our messageId) carries the
        // token; probe 200: info.json again with the browser's credentials, and the full image.
        let token = null, authorized = false, messages = 0;
        const probeService = () => ((info && info.service) || []).find(s => s.type === "AuthProbeService2");
        async function probe(service) {
          const headers = token ? {Authorization: "Bearer " + token} : {};
          return await (await fetch(service.id, {headers})).json();
        }
        function requestToken(tokenService) {
          return new Promise(resolve => {
            const messageId = "m" + (++messages), frame = document.createElement("iframe");
            const listener = e => {
              if (e.origin !== new URL(tokenService.id).origin || !e.data || e.data.messageId !== messageId) return;
              window.removeEventListener("message", listener); frame.remove();
              resolve(e.data.type === "AuthAccessToken2" ? e.data.accessToken : null);
            };
            window.addEventListener("message", listener);
            // A frame that never answers (refused, or no such service): no token.
            setTimeout(() => { window.removeEventListener("message", listener); frame.remove(); resolve(null); }, 10000);
            frame.hidden = true;
            frame.src = tokenService.id + "?messageId=" + messageId + "&origin=" + encodeURIComponent(location.origin);
            document.body.appendChild(frame);
          });
        }
        function services(probeService) {
          const access = (probeService.service || []).find(s => s.type === "AuthAccessService2") || {};
          const inner = access.service || [];
          return {access, token: inner.find(s => s.type === "AuthAccessTokenService2"), logout: inner.find(s => s.type === "AuthLogoutService2")};
        }
        const text = map => map ? (map.en || Object.values(map)[0] || [""])[0] : "";
        function openWindow(url, then) {
          const w = window.open(url, "_blank", "width=480,height=560");
          const timer = setInterval(() => { if (!w || w.closed) { clearInterval(timer); then(); } }, 250);
        }
        async function authorize() {
          const service = probeService();
          if (!service) return;
          const s = services(service), bar = document.getElementById("auth"), label = document.getElementById("auth-text"), button = document.getElementById("auth-button");
          if (!authorized && s.token) token = await requestToken(s.token);   // a session from before
          const result = await probe(service);
          // The external profile has no window: the user arrives logged in (by a front proxy), or not at all.
          const external = s.access.profile === "external";
          bar.hidden = false;
          if (result.status === 200) {
            label.textContent = "full image";
            button.hidden = external || !s.logout;
            button.textContent = text(s.logout && s.logout.label) || "Log out";
            button.onclick = () => openWindow(s.logout.id, () => { token = null; authorized = false; restart(); });
            if (!authorized) { authorized = true; restart(); }
            return;
          }
          label.textContent = text(result.heading) || text(s.access.heading) || "restricted";
          button.hidden = external;
          button.textContent = text(s.access.confirmLabel) || text(s.access.label) || "Log in";
          // Once the window closes: a token, the probe again (authorize asks for the token itself).
          button.onclick = () => openWindow(s.access.id + "?origin=" + encodeURIComponent(location.origin), authorize);
        }
        // The image again (after a login or a logout): its info.json and every tile.
        function restart() {
          for (const t of tiles.values()) { t.state = "dropped"; t.img.removeAttribute("src"); t.img.remove(); }
          tiles.clear(); inFlight = 0; waiting = 0; info = null;
          start();
        }
        async function start() {
          try {
            // With the browser's credentials once authorized (another origin's server then names this one).
            const response = await fetch(BASE + "/info.json", authorized ? {credentials: "include"} : {});
            // 503: an upload whose header has not arrived, or a build waiting for its turn.
            if (response.status === 503) { statusLine.textContent = (await response.text()).trim(); setTimeout(start, 1000); return; }
            if (!response.ok) { statusLine.textContent = "no image: HTTP " + response.status; return; }
            info = await response.json();
          } catch (e) { statusLine.textContent = "cannot load " + BASE + "/info.json"; return; }
          if (!authorized && probeService()) authorize();
          if (!info.tiles || !info.tiles.length) { statusLine.textContent = "restricted: " + info.width + " x " + info.height; return; }
          W = info.width; H = info.height; T = info.tiles[0].width; scales = info.tiles[0].scaleFactors;
          minZ = Math.min(fit(), 1); maxZ = 4 * (window.devicePixelRatio || 1);
          if (!readHash()) { z = fit(); cx = W / 2; cy = H / 2; }
          if (LIVE) await progress();   // before the first requests: which rows are written
          else statusLine.textContent = W + " x " + H;
          render(); view.focus();
        }
        // A page of a multi-page master (the server's `book`, `book~2`, ...): links to every page, from
        // the book's manifest (one canvas a page, each painted by its page's service).
        async function pageLinks() {
          const current = decodeURIComponent(ID), book = current.replace(/~[0-9]+$/, "");
          const manifest = await (await fetch("../iiif/3/" + encodeURIComponent(book) + "/manifest")).json();
          const canvases = manifest.items || [];
          if (canvases.length < 2) return;
          const bar = document.getElementById("pages");
          bar.appendChild(document.createTextNode("page "));
          canvases.forEach((canvas, n) => {
            const service = canvas.items[0].items[0].body.service[0].id, page = service.substring(service.lastIndexOf("/") + 1);
            const link = document.createElement("a");
            link.textContent = String(n + 1);
            link.href = "../view/" + page;
            if (decodeURIComponent(page) === current) link.className = "current";
            bar.appendChild(link);
          });
          bar.hidden = false;
        }
        // The page's own image first: the book's manifest may start the build of its first page.
        start().then(() => { if (LIVE) return pageLinks(); }).catch(() => {});
        </script></body></html>
        """#
}
