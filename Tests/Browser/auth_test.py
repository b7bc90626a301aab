"""A restricted image in the viewer, through IIIF Authorization Flow 2.0, in a real browser: headless
Chromium (Debian's) driven by Playwright.

Starts `tiler serve --config` on a folder holding a generated 3000 x 2000 picture, restricted-a.jpg (a rule
"restricted*": alice in full, everyone else a degraded tier of at most 400 pixels), and an open one,
open.jpg; the config's users file holds alice's bcrypt hash. The viewer page runs on ANOTHER ORIGIN than the
image server (same site: 127.0.0.1, another port): the server's own /view/restricted-a, its BASE made the
server's absolute URL and LIVE false, served by Python's http.server (no content security policy: that
comes from our server as a header); the access policy's `origins` names that origin. Then:
  1. anonymous: the view completes and shows the degraded image: the #auth bar is visible with its "Log
     in" button, every tile the page requested is of a level whose whole image is at most 400 pixels wide
     (3000 * sw / w), none was answered 401, the screen is the source shrunk to 375 x 250 and enlarged
     (PSNR), closer to that than to the sharp source; a full-size tile fetched from the page answers 401;
  2. the login: the button opens the access service in a popup, alice's name and password submitted there,
     the popup closes itself; the page asks the token service (origin= the viewer's origin), receives
     AuthAccessToken2 by postMessage from the server's origin, its probe with `Authorization: Bearer` says
     200; the button turns "Log out", info.json comes again with the browser's credentials (no
     maxWidth, scale factor 1); the fitted view is sharp (the source shrunk by 3, PSNR), and zoomed to 1:1
     (#x=1500&y=1000&z=1) the full-size tiles are requested and answered 200, the screen the source's own
     pixels (PSNR, at least 30 dB); a full-size tile fetched from the page with credentials answers 200;
  3. the logout: "Log out" opens the logout service in a popup, which closes itself; the page is degraded
     again ("Log in", tiles of at most 400 pixels, none 401), a full-size tile fetched from the page with
     credentials answers 401, the page's probe says 401, and so does the probe with the token from before
     the logout (the session it belonged to ended);
  4. a trusted proxy instead of the login: a second server whose config has "trustedProxies": ["127.0.0.1"]
     and access "userHeader": "X-Remote-User" (no users file: the access service's profile is "external").
     A browser context whose requests to that server carry `X-Remote-User: alice` (added by Playwright's
     routing, as a proxy in front would) shows the full image without any window opening: token through
     the hidden frame, probe 200, "Log out", full-size tiles answered 200, the 1:1 screen the source's
     pixels; a context without the header gets the degraded image;
  5. the open image's info.json names no service and offers scale factor 1 to anyone;
  6. no error in the console of the page or of the popups, but the 401s this test causes on purpose (its
     own fetches of full-size tiles while not allowed), listed in ALLOWED_CONSOLE.
Lines starting "note" are not failures: timings, and what the run saw that the viewer could do better.
Screenshots are kept in the folder given as the first argument (the tiler binary is the second).
Exits non-zero on any failure.
"""
import http.client, json, os, re, subprocess, sys, tempfile, time, urllib.parse
import numpy as np
from PIL import Image
from playwright.sync_api import sync_playwright
from pictures import make_image, psnr

OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
TILER = sys.argv[2] if len(sys.argv) > 2 else "tiler"
W, H = 3000, 2000
VIEW_W, VIEW_H = 1000, 700
TIER = 400                      # the degraded tier's maxWidth (and so maxHeight)
USER, PASSWORD = "alice", "wonderland-7"
HTPASSWD = "alice:$2y$05$ao1VyiSy1LpsK540fQfVdOyx3CoHGnKcFen6xpF6NGaorYwNHptJK\n"   # htpasswd -nbB alice wonderland-7
SESSION_KEY = "0123456789abcdef0123456789abcdef-test"
# A full-size tile (scale 1) near the middle: what the degraded tier refuses.
FULL_TILE = "/iiif/3/restricted-a/1280,768,256,256/256,256/0/default.jpg"
# The console errors this test causes on purpose: its own fetches of FULL_TILE while not allowed (Chromium
# logs a resource answered 401). Nothing else may appear in the console of the page or of a popup.
ALLOWED_CONSOLE = [(re.compile(r"^Failed to load resource: the server responded with a status of 401 \(Unauthorized\)$"),
                    re.compile(r"^http://127\.0\.0\.1:\d+" + re.escape(FULL_TILE) + "$"))]   # (the message, where: the URL)
failures = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

def note(what):
    print("note " + what)

TILE = re.compile(r"/iiif/3/restricted(?:-|%2D)a/(\d+),(\d+),(\d+),(\d+)/(\d+),(\d+)/0/default\.jpg$")

def tile_of(url):
    """(x, y, w, h, sw, sh) of a tile URL of restricted-a, or None."""
    found = TILE.search(url.split("?")[0])
    return tuple(map(int, found.groups())) if found else None

def full_width(t):
    """The width of the whole image at a tile's scale: 3000 * sw / w."""
    return W * t[4] / t[2]

# The tiles in the view: every <img> complete, the view whole (data-tiles-left '0'), and `scale` (w / sw,
# rounded) the finest of their scales.
SETTLED_AT = ("scale => { const v = document.querySelector('#view'), imgs = [...v.querySelectorAll('img')];"
              " if (v.dataset.tilesLeft !== '0' || imgs.length === 0 || !imgs.every(i => i.complete && i.naturalWidth > 0)) return false;"
              " const s = imgs.map(i => { const m = /\\/\\d+,\\d+,(\\d+),\\d+\\/(\\d+),\\d+\\//.exec(i.src); return m ? Math.round(m[1] / m[2]) : 0; });"
              " return Math.min(...s) === scale; }")

def settle(page, scale, timeout=30000):
    """Waits until the view is whole with tiles of `scale` its finest, then two frames painted."""
    page.wait_for_function(SETTLED_AT, arg=scale, timeout=timeout)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

def bar(page):
    """The #auth bar: whether it shows, its text, its button's text (None when the button is hidden)."""
    return page.evaluate("() => { const a = document.getElementById('auth'), b = document.getElementById('auth-button');"
                         " return [!a.hidden && a.offsetWidth > 0, document.getElementById('auth-text').textContent,"
                         " b.hidden ? null : b.textContent]; }")

def screenshot(page, name):
    """A screenshot (kept in OUT) as an array, and a mask of the pixels outside the #auth bar and the status line."""
    path = os.path.join(OUT, name)
    page.screenshot(path=path)
    got = np.asarray(Image.open(path).convert("RGB"))
    keep = np.ones(got.shape[:2], bool)
    for selector in ("#auth", "#status"):
        box = page.locator(selector).bounding_box()
        if box:
            keep[max(0, int(box["y"]) - 2):int(box["y"] + box["height"]) + 3, max(0, int(box["x"]) - 2):int(box["x"] + box["width"]) + 3] = False
    return got, keep

def expected_view(source, cx, cy, z):
    """What the view shows at zoom 1 about (cx, cy): the source's pixels."""
    left, top = int(round(cx * z - VIEW_W / 2)), int(round(cy * z - VIEW_H / 2))
    return source[top:top + VIEW_H, left:left + VIEW_W].astype(np.float64)

def fitted_expectations(source_image):
    """The fitted view (zoom 1/3: 1000 x 666.7 pixels at rows 16.7..683.3) as it should look sharp (the source
    shrunk by 3) and degraded (the 375 x 250 level, enlarged), and the screen region compared with them."""
    sharp = np.asarray(source_image.resize((1000, 667), Image.BOX)).astype(np.float64)
    coarse = np.asarray(source_image.resize((375, 250), Image.BOX).resize((1000, 667), Image.BILINEAR)).astype(np.float64)
    region = (slice(100, 600), slice(100, 900))
    inside = (slice(83, 583), slice(100, 900))   # the same pixels in the 1000 x 667 image
    return sharp, coarse, region, inside

def fetch_status(page, url):
    """The status of `url` fetched from the page with the browser's credentials (0: the fetch failed)."""
    return page.evaluate("url => fetch(url, {credentials: 'include', cache: 'no-store'}).then(r => r.status, () => 0)", url)

def probe_status(page, url, token):
    """The probe service's answer (its JSON's status) to a fetch from the page with `token` (None: none)."""
    return page.evaluate("([url, token]) => fetch(url, {headers: token ? {Authorization: 'Bearer ' + token} : {}, cache: 'no-store'})"
                         ".then(r => r.json()).then(j => j.status, () => 0)", [url, token])

class Watch:
    """What a browser context's pages did: every response (page, url, status, the request), console errors
    (but ALLOWED_CONSOLE), page errors, popups; `phase` tags the responses."""
    def __init__(self, context):
        self.context, self.phase = context, "start"
        self.responses, self.errors, self.allowed, self.popups, self.failed = [], [], [], [], []
        context.on("page", self.attach)

    def attach(self, page):
        if self.context.pages and page is not self.context.pages[0]:
            self.popups.append(page)
        name = "page" if not self.popups or page is not self.popups[-1] else f"popup {len(self.popups)}"
        page.on("response", lambda r: self.responses.append((self.phase, r.url, r.status, r)))
        page.on("requestfailed", lambda r: self.failed.append((self.phase, r.url, r.failure)))
        page.on("console", lambda m: self.console(name, m))
        page.on("pageerror", lambda e: self.errors.append(f"{name}: page error: {e}"))

    def console(self, name, message):
        if message.type != "error":
            return
        text = f"{name}: {message.text} (at {message.location.get('url') or '?'})"
        where = message.location.get("url") or ""
        (self.allowed if any(t.match(message.text) and u.match(where) for t, u in ALLOWED_CONSOLE) else self.errors).append(text)

    def own(self, ask):
        """`ask()`'s answer, the responses meanwhile (this test's own fetches) tagged "own", not the phase's."""
        phase, self.phase = self.phase, "own"
        try:
            return ask()
        finally:
            self.phase = phase

    def tiles(self, *phases):
        """The tile responses of `phases`: (url, status, (x, y, w, h, sw, sh))."""
        return [(u, s, tile_of(u)) for p, u, s, _ in self.responses if p in phases and tile_of(u)]

    def with_path(self, part, *phases):
        return [(u, s, r) for p, u, s, r in self.responses if p in phases and part in u]

def degraded_tiles(watch, phases, what):
    """Checks the tiles the page requested in `phases`: each of a level whose whole image fits the tier,
    none answered 401 (or anything but 200/304)."""
    tiles = watch.tiles(*phases)
    widest = max((full_width(t) for _, _, t in tiles), default=0)
    check(tiles and widest <= TIER + 1,
          f"{what}: the {len(tiles)} tiles requested are of levels whose whole image is at most {TIER} pixels wide "
          f"(widest {widest:.0f}; scales {sorted({round(t[2] / t[4]) for _, _, t in tiles})})")
    bad = [f"{s} {u}" for u, s, _ in tiles if s not in (200, 304)]
    check(not bad, f"{what}: no tile answered 401 (or anything but 200): {bad[:5]}")

def shows_degraded(page, source_image, name, what):
    """The fitted view: the degraded level enlarged, rather than the sharp source."""
    got, _ = screenshot(page, name)
    sharp, coarse, region, inside = fitted_expectations(source_image)
    against_coarse = psnr(got[region], coarse[inside])
    against_sharp = psnr(got[region], sharp[inside])
    check(against_coarse >= 24 and against_coarse >= against_sharp + 2,
          f"{what}: the screen is the 375 x 250 level enlarged, {against_coarse:.1f} dB (at least 24), rather than the "
          f"sharp source shrunk by 3, {against_sharp:.1f} dB (at least 2 dB less)")

def shows_full(page, source, source_image, base, name_fitted, name_zoomed, watch, phase, what):
    """The full image: the fitted view sharp (level at scale 2), then zoomed to 1:1 the full-size tiles,
    answered 200, and the screen the source's pixels."""
    settle(page, 2)
    got, _ = screenshot(page, name_fitted)
    sharp, coarse, region, inside = fitted_expectations(source_image)
    against_sharp, against_coarse = psnr(got[region], sharp[inside]), psnr(got[region], coarse[inside])
    check(against_sharp >= 24 and against_sharp >= against_coarse + 1,
          f"{what}: the fitted view is sharp: against the source shrunk by 3 {against_sharp:.1f} dB (at least 24), "
          f"against the degraded level {against_coarse:.1f} dB")
    page.evaluate("location.hash = '#x=1500&y=1000&z=1'")
    settle(page, 1)
    got, keep = screenshot(page, name_zoomed)
    value = psnr(got[keep], expected_view(source, 1500, 1000, 1)[keep])
    check(value >= 30, f"{what}: zoomed to 1:1 at (1500, 1000), the screen against the source's pixels: {value:.1f} dB (at least 30)")
    full = [(u, s) for u, s, t in watch.tiles(phase) if t[2] == t[4] and t[3] == t[5]]
    check(len(full) >= 12 and all(s == 200 for _, s in full),
          f"{what}: the full-size tiles (sw == w) requested were answered 200: {len(full)} tiles, "
          f"statuses {sorted({s for _, s in full})}")

def tokens_and_probes(watch, phase, origin):
    """The token service's requests of `phase` (their origin= parameter) and the probes' answers:
    [(had a bearer token, the JSON's status)]."""
    token_requests = [u for u, _, _ in watch.with_path("/auth/token", phase)]
    origins = [urllib.parse.parse_qs(urllib.parse.urlsplit(u).query).get("origin", [""])[0] for u in token_requests]
    probes = []
    for u, s, r in watch.with_path("/auth/probe/", phase):
        if r.request.method != "GET" or s != 200:
            continue
        try:
            answer = r.json()
        except Exception:
            answer = {}
        probes.append(("authorization" in r.request.all_headers(), answer.get("status")))
    return origins, probes

def serve(folder, config):
    """Starts `tiler serve --config config`; returns the process and the port it printed."""
    log = open(os.path.join(folder, os.path.basename(config) + ".log"), "w+")
    server = subprocess.Popen([TILER, "serve", "--config", config], stderr=log, stdout=log)
    port = None
    for _ in range(200):
        log.seek(0)
        found = re.search(r"serving .* at http://127\.0\.0\.1:(\d+)/", log.read())
        if found:
            port = int(found.group(1))
            break
        if server.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    check(port is not None, f"tiler serve --config {os.path.basename(config)} started" + ("" if port else f": {log.read()[-500:]}"))
    return server, port

def get(port, path, headers={}):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    return response.status, response.read()

def built(port):
    """Asks for restricted-a's info.json (which starts its build) and waits until its store is ready."""
    get(port, "/iiif/3/restricted-a/info.json")
    for _ in range(600):
        status, body = get(port, "/images/restricted-a")
        if status == 200 and json.loads(body).get("state") == "ready":
            return True
        time.sleep(0.1)
    return False

def viewer_copy(port, site, name):
    """The server's viewer page for restricted-a, made to run from another origin: BASE the server's
    absolute URL, LIVE false. Written into `site` as `name`; returns whether both replacements happened."""
    status, body = get(port, "/view/restricted-a")
    html = body.decode()
    html, bases = re.subn(r'BASE = "\.\./iiif/3/(restricted(?:-|%2D)a)"', lambda m: f'BASE = "http://127.0.0.1:{port}/iiif/3/{m.group(1)}"', html)
    html, lives = re.subn(r"LIVE = true\b", "LIVE = false", html)
    check(status == 200 and bases == 1 and lives == 1,
          f"the viewer page copied for another origin: /view/restricted-a {status}, BASE made absolute ({bases}), LIVE false ({lives})")
    open(os.path.join(site, name), "w").write(html)
    return bases == 1 and lives == 1

# Records the messages the page receives (the token service's postMessage): origin, type, the token.
MESSAGES = ("window.addEventListener('message', e => { if (window.top === window) (window.__messages = window.__messages || [])"
            ".push({origin: e.origin, type: e.data && e.data.type, token: e.data && e.data.accessToken, messageId: e.data && e.data.messageId}); });")

def new_page(browser, **options):
    context = browser.new_context(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1, **options)
    context.add_init_script(MESSAGES)
    watch = Watch(context)
    page = context.new_page()
    return context, page, watch

def login_flow(browser, port, viewer_url, origin, source, source_image):
    """Anonymous, login, logout: the steps 1 to 3 of the docstring."""
    context, page, watch = new_page(browser)
    server = f"http://127.0.0.1:{port}"
    probe_url = f"{server}/auth/probe/restricted-a"
    started = time.monotonic()
    try:
        # 1. Anonymous: the degraded image and the login button.
        watch.phase = "anonymous"
        page.goto(viewer_url)
        page.wait_for_function("() => !document.getElementById('auth').hidden", timeout=30000)
        settle(page, 8)
        shown, text, button = bar(page)
        check(shown and button == "Log in", f"anonymous: the #auth bar shows {text!r} and a {button!r} button")
        status = page.evaluate("document.getElementById('status').textContent")
        check(status == f"{W} x {H}", f"anonymous: the status line gives the size: {status!r}")
        shows_degraded(page, source_image, "auth-anonymous.png", "anonymous")
        degraded_tiles(watch, ["anonymous"], "anonymous")
        origins, probes = tokens_and_probes(watch, "anonymous", origin)
        check(origins == [origin] and probes == [(False, 401)],
              f"anonymous: the page asked the token service once (origin={origins}) and its probe without a token says 401: {probes}")
        check(watch.own(lambda: fetch_status(page, server + FULL_TILE)) == 401, "anonymous: a full-size tile fetched from the page answers 401")
        note(f"anonymous view complete {time.monotonic() - started:.1f} s after the page was opened")

        # 2. The login, in the access service's popup.
        watch.phase = "login"
        mark = time.monotonic()
        with page.expect_popup(timeout=10000) as opened:
            page.click("#auth-button")
        popup = opened.value
        popup.wait_for_load_state()
        check(popup.url.startswith(f"{server}/auth/login"), f"the login button opens the access service in a window: {popup.url}")
        popup.screenshot(path=os.path.join(OUT, "auth-login-window.png"))
        popup.fill("input[name=username]", USER)
        popup.fill("input[name=password]", PASSWORD)
        with popup.expect_event("close", timeout=15000):
            popup.click("button[type=submit]")
        check(popup.is_closed(), "after the login the access service's window closes itself")
        page.wait_for_function("() => document.getElementById('auth-button').textContent === 'Log out'", timeout=20000)
        shown, text, button = bar(page)
        check(shown and button == "Log out", f"after the login the bar shows {text!r} and a {button!r} button")
        messages = page.evaluate("window.__messages || []")
        tokens = [m for m in messages if m["type"] == "AuthAccessToken2"]
        check(tokens and all(m["origin"] == server and m["token"] for m in tokens),
              f"the page received AuthAccessToken2 by postMessage from the server's origin: "
              f"{[(m['origin'], m['type'], m['messageId']) for m in messages]}")
        token = tokens[-1]["token"] if tokens else None
        shows_full(page, source, source_image, server, "auth-login-fitted.png", "auth-login-zoomed.png", watch, "login", "after the login")
        origins, probes = tokens_and_probes(watch, "login", origin)
        check(origins == [origin] and probes == [(True, 200)],
              f"after the login: the token service asked once, with origin={origins}, the probe with the bearer token says 200: {probes}")
        infos = [(s, r) for u, s, r in watch.with_path("/info.json", "login")]
        credentialed = [(s, r.json()) for s, r in infos if s == 200 and "cookie" in r.request.all_headers()]
        check(len(credentialed) == 1 and 1 in credentialed[0][1]["tiles"][0]["scaleFactors"] and credentialed[0][1].get("maxWidth", W) > TIER,
              f"after the login info.json came again with the session cookie, all levels: "
              f"{[(s, j['tiles'][0]['scaleFactors'], j.get('maxWidth')) for s, j in credentialed]}")
        check(watch.own(lambda: fetch_status(page, server + FULL_TILE)) == 200, "after the login a full-size tile fetched from the page with credentials answers 200")
        bad = [f"{s} {u}" for p, u, s, _ in watch.responses if p == "login" and s not in (200, 204, 304)]
        check(not bad, f"after the login every request answered 200 (or 304): {bad[:5]}")
        note(f"login to the full image at 1:1: {time.monotonic() - mark:.1f} s")

        # 3. The logout, in the logout service's popup.
        watch.phase = "logout"
        mark = time.monotonic()
        with page.expect_popup(timeout=10000) as opened:
            page.click("#auth-button")
        popup = opened.value
        if not popup.is_closed():
            popup.wait_for_event("close", timeout=15000)
        check(popup.is_closed() and popup.url.startswith(f"{server}/auth/logout"),
              f"\"Log out\" opens the logout service in a window, which closes itself: {popup.url}")
        page.wait_for_function("() => document.getElementById('auth-button').textContent === 'Log in'", timeout=20000)
        settle(page, 8)
        shown, text, button = bar(page)
        check(shown and button == "Log in", f"after the logout the bar shows {text!r} and a {button!r} button again")
        got, keep = screenshot(page, "auth-logout-zoomed.png")
        coarse = np.asarray(source_image.resize((375, 250), Image.BOX).resize((W, H), Image.BILINEAR))
        against_coarse = psnr(got[keep], expected_view(coarse, 1500, 1000, 1)[keep])
        against_source = psnr(got[keep], expected_view(source, 1500, 1000, 1)[keep])
        check(against_coarse >= 30 and against_coarse >= against_source + 6,
              f"after the logout, at 1:1 the screen is the 375 x 250 level enlarged 8 times, {against_coarse:.1f} dB (at least 30), "
              f"not the source's pixels, {against_source:.1f} dB (at least 6 dB less)")
        degraded_tiles(watch, ["logout"], "after the logout")
        check(watch.own(lambda: fetch_status(page, server + FULL_TILE)) == 401, "after the logout a full-size tile fetched from the page with credentials answers 401")
        origins, probes = tokens_and_probes(watch, "logout", origin)
        check(probes and probes[-1][1] == 401, f"after the logout the page's probe says 401: {probes}")
        check(watch.own(lambda: probe_status(page, probe_url, token)) == 401,
              "after the logout the probe with the token from before says 401 (its session ended)")
        cookies = [c["name"] for c in context.cookies(server)]
        check("tiler_session" not in cookies, f"after the logout the browser holds no session cookie: {cookies}")
        note(f"logout to the degraded view: {time.monotonic() - mark:.1f} s")
        check(not watch.errors, f"login flow: no error in the console of the page or the popups: {watch.errors}")
        check(len(watch.allowed) == 2, f"login flow: the console errors allowed are those of this test's own two 401 fetches: {watch.allowed}")
    except Exception as error:   # a wait that timed out, say: this case fails, the next runs
        page.screenshot(path=os.path.join(OUT, "auth-login-flow-failed.png"))
        check(False, f"login flow: {type(error).__name__}: {str(error).splitlines()[0]} (bar {bar(page)}; console {watch.errors})")
    finally:
        context.close()

def proxy_flow(browser, port, viewer_url, origin, source, source_image):
    """A trusted proxy's user header instead of the login: step 4 of the docstring."""
    server = f"http://127.0.0.1:{port}"
    # With the header: Playwright adds it to every request to the image server, as a proxy in front would.
    context, page, watch = new_page(browser)
    def with_user(route):
        route.continue_(headers={**route.request.headers, "x-remote-user": USER})
    context.route(f"{server}/**", with_user)
    started = time.monotonic()
    try:
        watch.phase = "proxy"
        page.goto(viewer_url)
        page.wait_for_function("() => document.getElementById('auth-text').textContent === 'full image'", timeout=30000)
        shows_full(page, source, source_image, server, "auth-proxy-fitted.png", "auth-proxy-zoomed.png", watch, "proxy", "with the proxy's header")
        origins, probes = tokens_and_probes(watch, "proxy", origin)
        check(origins == [origin] and probes == [(True, 200)],
              f"with the proxy's header: the token through the hidden frame (origin={origins}), the probe with it says 200: {probes}")
        check(not watch.popups, f"with the proxy's header no window opened: {[p.url for p in watch.popups]}")
        shown, text, button = bar(page)
        check(shown and button is None, f"with the proxy's header: the bar says {text!r}, no button (the external profile: no logout here): {button!r}")
        bad = [f"{s} {u}" for p, u, s, _ in watch.responses if s not in (200, 204, 304)]
        check(not bad, f"with the proxy's header every request answered 200: {bad[:5]}")
        check(not watch.errors, f"with the proxy's header: no error in the console: {watch.errors}")
        note(f"proxy header to the full image at 1:1: {time.monotonic() - started:.1f} s")
    except Exception as error:
        page.screenshot(path=os.path.join(OUT, "auth-proxy-failed.png"))
        check(False, f"proxy flow: {type(error).__name__}: {str(error).splitlines()[0]} (bar {bar(page)}; console {watch.errors})")
    finally:
        context.close()
    # Without the header: the degraded image.
    context, page, watch = new_page(browser)
    try:
        watch.phase = "no header"
        page.goto(viewer_url)
        page.wait_for_function("() => !document.getElementById('auth').hidden", timeout=30000)
        settle(page, 8)
        shown, text, button = bar(page)
        # The external profile (no users here): no window to open, so no button; the probe's heading.
        check(shown and button is None and text == "This image is restricted",
              f"without the proxy's header the bar shows the probe's heading {text!r} and no button: {button!r}")
        shows_degraded(page, source_image, "auth-proxy-no-header.png", "without the proxy's header")
        degraded_tiles(watch, ["no header"], "without the proxy's header")
        origins, probes = tokens_and_probes(watch, "no header", origin)
        check(probes == [(False, 401)], f"without the proxy's header the probe says 401: {probes}")
        check(not watch.popups and not watch.errors, f"without the proxy's header: no window, no console error: {watch.errors}")
    except Exception as error:
        page.screenshot(path=os.path.join(OUT, "auth-proxy-no-header-failed.png"))
        check(False, f"proxy flow without the header: {type(error).__name__}: {str(error).splitlines()[0]} (bar {bar(page)}; console {watch.errors})")
    finally:
        context.close()

def main():
    began = time.monotonic()
    work = tempfile.mkdtemp()
    images, site = os.path.join(work, "images"), os.path.join(work, "site")
    os.makedirs(images)
    os.makedirs(site)
    make_image(os.path.join(images, "restricted-a.jpg"), W, H)
    make_image(os.path.join(images, "open.jpg"), 1200, 800)
    source_image = Image.open(os.path.join(images, "restricted-a.jpg")).convert("RGB")
    source = np.asarray(source_image)
    open(os.path.join(work, "users"), "w").write(HTPASSWD)
    # The viewer's origin: Python's http.server on another port of 127.0.0.1.
    other = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", site],
                             stdout=subprocess.PIPE, stderr=open(os.path.join(work, "site.log"), "w"), text=True)
    servers = []
    try:
        viewer_port = int(re.search(r"port (\d+)", other.stdout.readline()).group(1))
        origin = f"http://127.0.0.1:{viewer_port}"
        rule = {"match": "restricted*", "allow": [USER], "degraded": {"maxWidth": TIER}}
        configs = {
            "login.json": {"folder": images, "cache": os.path.join(work, "cache-login"), "port": 0, "host": "127.0.0.1",
                           "access": {"users": "users", "sessionKey": SESSION_KEY, "origins": [origin], "rules": [rule]}},
            "proxy.json": {"folder": images, "cache": os.path.join(work, "cache-proxy"), "port": 0, "host": "127.0.0.1",
                           "trustedProxies": ["127.0.0.1"],
                           "access": {"userHeader": "X-Remote-User", "sessionKey": SESSION_KEY, "origins": [origin], "rules": [rule]}},
        }
        ports = {}
        for name, config in configs.items():
            json.dump(config, open(os.path.join(work, name), "w"))
            server, port = serve(work, os.path.join(work, name))
            servers.append(server)
            if port is None:
                raise SystemExit(1)
            ports[name] = port
            check(built(port), f"{name}: restricted-a built")
        ready = viewer_copy(ports["login.json"], site, "login.html") & viewer_copy(ports["proxy.json"], site, "proxy.html")
        # The open image: no service, every level to anyone.
        status, body = get(ports["login.json"], "/iiif/3/open/info.json")
        info = json.loads(body) if status == 200 else {}
        check(status == 200 and "service" not in info and 1 in info["tiles"][0]["scaleFactors"],
              f"open.jpg's info.json names no service and offers scale 1 to anyone: {status}, {info.get('tiles')}")
        # The same from the proxy config, with a header from an address it trusts, without: the server's side.
        for headers, want in [({"X-Remote-User": USER}, 200), ({}, 401)]:
            status, _ = get(ports["proxy.json"], FULL_TILE, headers)
            check(status == want, f"the proxy config's server: a full-size tile with headers {headers} answers {status} ({want} wanted)")
        note(f"setup (pictures, servers, builds): {time.monotonic() - began:.1f} s")
        if ready:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                mark = time.monotonic()
                login_flow(browser, ports["login.json"], f"{origin}/login.html", origin, source, source_image)
                note(f"login flow: {time.monotonic() - mark:.1f} s")
                mark = time.monotonic()
                proxy_flow(browser, ports["proxy.json"], f"{origin}/proxy.html", origin, source, source_image)
                note(f"proxy flow: {time.monotonic() - mark:.1f} s")
                browser.close()
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
        other.terminate()
        other.wait(10)
    print(f"screenshots in {OUT}; {time.monotonic() - began:.1f} s in all")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

main()
