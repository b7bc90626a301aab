"""The viewer page in a real browser: headless Chromium (Debian's) driven by Playwright.

Starts `tiler serve` on a folder holding a generated photograph-like JPEG, then:
  1. screenshots at view states given in the URL fragment, compared with the source's own pixels
     (Pillow's decode, cropped, box-averaged for coarser zooms): PSNR thresholds stated below;
  2. a drag and a wheel zoom: the view (the fragment) moves as far as the pointer did, the zoom
     doubles about the pointer, and the tiles requested are those of the level the zoom needs;
  3. an image still being uploaded (a second server, `--allow-uploads`): the page shows the progress and
     the tiles of the rows written so far, then the whole image once the upload ends;
  4. another site's page trying to upload into a server on loopback (fetch PUT, a form POST) stores
     nothing, and a page reached under another host name (DNS rebinding) is refused;
  5. a page of a multi-page TIFF master (a second server, on a folder holding a generated three-page
     book.tif): /view/book~2 shows the page links "1 2 3", "2" the current one, the status line page 2's
     size and the screen page 2 fitted; a click on "3" opens /view/book~3, page 3's size and picture; no
     request fails and the console stays clean;
  6. the listing page as a picker, clicked through as a person would (a folder holding top.jpg and
     maps/old/rome.jpg, two different generated pictures): / lists the folder maps/ then the image top,
     its thumbnail loaded and showing top; a click on maps/ opens /?folder=maps, listing old/; a click on
     old/ opens /?folder=maps%2Fold, its heading a trail of links back up ("Images / maps / old"),
     listing rome with its thumbnail; a click on rome opens the viewer at /view/maps%2Fold%2Frome, the
     picture fitted (PSNR against the source shrunk); back, then the trail's "maps" and "Images" lead up
     to the top listing. Every request is answered 200 (or 304), as the page's events and the server's
     access log have them, and the console stays clean.
Screenshots are kept in the folder given as the first argument, to look at.
Exits non-zero on any failure.
"""
import http.client, json, math, os, re, subprocess, sys, tempfile, threading, time
import numpy as np
from PIL import Image, ImageFilter
from playwright.sync_api import sync_playwright
from pictures import make_image, make_book, psnr

OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
TILER = sys.argv[2] if len(sys.argv) > 2 else "tiler"
W, H = 3000, 2000
VIEW_W, VIEW_H = 1000, 700
failures = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

def expected_view(source, cx, cy, z):
    """What the view shows: the source box-averaged by 1/z (z = 1/2^k) around (cx, cy)."""
    f, (h, w) = int(round(1 / z)), source.shape[:2]
    small = source.reshape(h // f, f, w // f, f, 3).mean(axis=(1, 3)) if f > 1 else source.astype(np.float64)
    left, top = int(round(cx * z - VIEW_W / 2)), int(round(cy * z - VIEW_H / 2))
    return small[top:top + VIEW_H, left:left + VIEW_W]

def waits(page, expression, arg=None, timeout=20000):
    """Whether `expression` (a function) became true within `timeout` milliseconds."""
    try:
        page.wait_for_function(expression, arg=arg, timeout=timeout)
        return True
    except Exception as error:
        print(f"     (waited {timeout} ms in vain: {str(error).splitlines()[0]})")
        return False

# Whether the view's fragment holds `key` (x, y or z) within `tolerance` of `value`: [key, value, tolerance].
HASH_IS = ("([k, v, t]) => { const m = new RegExp('[#&]' + k + '=([0-9.e+-]+)').exec(location.hash);"
           " return m !== null && Math.abs(Number(m[1]) - v) < t; }")

def fragment(page):
    values = dict(re.findall(r"([xyz])=([0-9.e+-]+)", page.evaluate("location.hash")))
    return {k: float(v) for k, v in values.items()}

def settle(page):
    """Waits until the view is whole: the viewer says no tile of it is left to draw (#view's
    data-tiles-left, which counts the tiles queued and loading as well as those in the page), every tile
    in the page is decoded, and two frames have been painted since."""
    page.wait_for_function(
        "() => { const v = document.querySelector('#view'), imgs = [...v.querySelectorAll('img')];"
        " return v.dataset.tilesLeft === '0' && imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0); }",
        timeout=30000)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

class SlowUpload(threading.Thread):
    """`PUT /images/{name}` of `data` (Content-Length known), 16 KiB every 50 ms, stopping twice until the
    test says go on: before the first byte of the body (`body`), and at `hold_at` bytes (`rest`), so the
    upload is certainly still in progress while the test looks. `held` is set at the second stop."""
    def __init__(self, port, name, data, hold_at):
        super().__init__(daemon=True)
        self.port, self.name, self.data, self.hold_at = port, name, data, hold_at
        self.started, self.body, self.held, self.rest = (threading.Event() for _ in range(4))
        self.status, self.reply = None, b""

    def go_on(self):
        self.body.set()
        self.rest.set()

    def run(self):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            connection.putrequest("PUT", f"/images/{self.name}")
            connection.putheader("Content-Type", "image/jpeg")
            connection.putheader("Authorization", "Bearer t")
            connection.putheader("Content-Length", str(len(self.data)))
            connection.endheaders()
            self.started.set()
            self.body.wait(50)   # the server drops a body idle for 60 s
            for offset in range(0, len(self.data), 16384):
                if offset == self.hold_at:
                    self.held.set()
                    self.rest.wait(50)
                connection.send(self.data[offset:offset + 16384])
                time.sleep(0.05)
            response = connection.getresponse()
            self.status, self.reply = response.status, response.read()
        except Exception as error:
            self.reply = repr(error).encode()

def uploading(browser):
    """The viewer of an image still being uploaded: the issue's promise, "While an image is still being
    built or uploaded, the page shows its progress and tiles appear as they become ready"."""
    uw, uh = 4000, 3000                      # 12 tile rows at full size; 5 levels
    work, folder = tempfile.mkdtemp(), tempfile.mkdtemp()
    make_image(os.path.join(work, "big.jpg"), uw, uh, quality=90)
    data = open(os.path.join(work, "big.jpg"), "rb").read()
    source = np.asarray(Image.open(os.path.join(work, "big.jpg")).convert("RGB"))
    server, port = serve(folder, "--allow-uploads", "--upload-token", "t")
    # Held at 60 % of the bytes: about 6 of 12 tile rows decoded, level 2's first tile row written.
    upload = SlowUpload(port, "big", data, hold_at=int(len(data) * 0.6) // 16384 * 16384)
    page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
    pending, most_pending = set(), [0]   # tile requests not answered yet, while uploading
    def sent(r):
        if "/iiif/3/big/" in r.url and r.url.endswith(".jpg"):
            pending.add(r)
            if upload.status is None:
                most_pending[0] = max(most_pending[0], len(pending))
    page.on("request", sent)
    page.on("requestfinished", lambda r: pending.discard(r))
    page.on("requestfailed", lambda r: pending.discard(r))
    status = lambda: page.evaluate("document.getElementById('status').textContent")
    shown = lambda: page.evaluate("[...document.querySelectorAll('#view img')]"
                                  ".filter(i => i.isConnected && i.complete && i.naturalWidth > 0).map(i => i.dataset.key)")
    def outside_status():
        """The screen's pixels but the status line's, and the median brightness (a pixel's largest
        channel) under the line in a screenshot and in the expected view: the line's background (black
        at 60 %) leaves 40 % of the image's light where it is drawn over the tiles, all of it where the
        tiles cover the line."""
        box, keep = page.locator("#status").bounding_box(), np.ones((VIEW_H, VIEW_W), bool)
        keep[int(box["y"]) - 1:int(box["y"] + box["height"]) + 2, int(box["x"]) - 1:int(box["x"] + box["width"]) + 2] = False
        inside = (slice(int(box["y"]) + 1, int(box["y"] + box["height"]) - 1), slice(int(box["x"]) + 1, int(box["x"] + box["width"]) - 1))
        return keep, lambda got, want: tuple(float(np.median(a[inside].max(axis=2))) for a in (got, want))
    try:
        upload.start()
        # The server knows the upload once it has read the request's head: /images/big answers 200.
        known = upload.started.wait(10)
        for _ in range(200):
            if not known or urlstatus(port, "/images/big") == 200:
                break
            time.sleep(0.05)
        else:
            known = False
        check(known, "the upload has started: GET /images/big answers 200")
        # At zoom 1/4 the page shows level 2 (1000 x 750, tiles of 1024 full-size rows) one to one.
        page.goto(f"http://127.0.0.1:{port}/view/big#x=2000&y=1500&z=0.25")
        # Before the header: the server's 503 explains, and the page asks again.
        said = waits(page, "() => document.getElementById('status').textContent.includes('header')")
        page.screenshot(path=os.path.join(OUT, "upload-before-header.png"))
        check(said, f"before the header has arrived the page says so: {status()!r}")
        upload.body.set()
        check(upload.held.wait(60), "the upload is held at 60 % of its bytes")
        # The progress: at least the 4 full-size tile rows under level 2's first row, not all 12.
        waits(page, r"() => { const m = /^building: (\d+) tile rows, \d+ of 5 levels$/"
                    r".exec(document.getElementById('status').textContent); return m && +m[1] >= 4; }")
        text = status()
        rows = int((re.match(r"building: (\d+)", text) or [0, -1])[1])
        state = json.loads(urlread(port, "/images/big"))
        check(4 <= rows < 12 and page.is_visible("#status") and state["state"] == "building",
              f"while uploading the page shows the progress: {text!r} (server: {state['tileRowsComplete']} tile rows, {state['state']})")
        # The tiles written so far are shown while the upload is still held: level 2's first row.
        first_row = [f"2/{c}/0" for c in range(4)]
        waits(page, "keys => { const shown = new Set([...document.querySelectorAll('#view img')]"
                    ".filter(i => i.isConnected && i.complete && i.naturalWidth > 0).map(i => i.dataset.key));"
                    " return keys.every(k => shown.has(k)); }", arg=first_row)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")   # painted
        shot = os.path.join(OUT, "upload-building.png")
        page.screenshot(path=shot)
        keys = shown()
        check(upload.is_alive() and upload.status is None and sorted(keys) == first_row,
              f"while the upload is held, the first tile row of level 2 is shown, nothing else: {sorted(keys)}")
        got = np.asarray(Image.open(shot).convert("RGB"))
        want = expected_view(source, 2000, 1500, 0.25)
        # Screen rows 0..230: full-size rows 100..1023 (level 2's first tile row); from 500 down: rows
        # 2100.. (its last tile row, written only at the end): the background.
        value = psnr(got[:231], want[:231])
        check(value >= 27, f"while uploading, the rows shown against the source: {value:.1f} dB (at least 27)")
        check(got[500:][outside_status()[0][500:]].max() < 60, "while uploading, the rows not written yet: the dark background")
        check(most_pending[0] <= 5, f"while uploading, at most 5 tile requests at a time, one connection kept for "
              f"the progress: {most_pending[0]}")
        upload.rest.set()
        upload.join(60)
        check(upload.status == 201, f"the upload ends with 201: {upload.status} {upload.reply[:120]!r}")
        # The progress gives way to the size, and the whole view matches the source.
        waits(page, f"() => document.getElementById('status').textContent === '{uw} x {uh}'", timeout=30000)
        settle(page)
        shot = os.path.join(OUT, "upload-complete.png")
        page.screenshot(path=shot)
        got = np.asarray(Image.open(shot).convert("RGB"))
        keep, under = outside_status()
        value = psnr(got[keep], want[keep])
        check(value >= 27, f"after the upload, the view (zoom 1/4) against the source: {value:.1f} dB (at least 27)")
        line, image = under(got, want)
        check(status() == f"{uw} x {uh}" and line < 0.7 * image,
              f"after the upload, the status line shows the size over the tiles: {status()!r}, median brightness "
              f"under it {line:.0f}, of the image there {image:.0f}")
    finally:
        upload.go_on()
        page.close()
        server.terminate()
        server.wait(10)

def book(browser):
    """The viewer's page links on a page of a multi-page TIFF master, as a user follows them."""
    folder = tempfile.mkdtemp()
    pages = make_book(os.path.join(folder, "book.tif"))
    server, port = serve(folder)
    base = f"http://127.0.0.1:{port}"
    page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
    errors, bad = [], []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status != 200 else None)
    page.on("requestfailed", lambda r: bad.append(f"failed {r.url} {r.failure}"))
    status = lambda: page.evaluate("document.getElementById('status').textContent")
    links = lambda: page.evaluate("[...document.querySelectorAll('#pages a')]"
                                  ".map(a => [a.textContent, a.className, new URL(a.href).pathname])")
    def shows(n, shot):
        """The screen (its bottom apart: the status line and the links) against page n fitted."""
        source = pages[n - 1]
        z = min(VIEW_W / source.width, VIEW_H / source.height)
        w, h = round(source.width * z), round(source.height * z)
        ox, oy = (VIEW_W - w) // 2, (VIEW_H - h) // 2
        want = np.asarray(source.resize((w, h), Image.LANCZOS))
        settle(page)
        page.screenshot(path=shot)
        got = np.asarray(Image.open(shot).convert("RGB"))
        bottom = min(oy + h, VIEW_H - 60) - 2
        value = psnr(got[oy + 2:bottom, ox + 2:ox + w - 2], want[2:bottom - oy, 2:w - 2])
        check(value >= 24, f"book~{n}: the screen shows page {n} fitted, {w} x {h} at ({ox}, {oy}): {value:.1f} dB "
                           f"against the page shrunk (at least 24)")
    try:
        page.goto(f"{base}/view/book~2")
        bar = page.locator("#pages")
        bar.wait_for(state="visible", timeout=20000)
        said = waits(page, "size => document.getElementById('status').textContent === size", arg="1500 x 2100")
        check(links() == [["1", "", "/view/book"], ["2", "current", "/view/book~2"], ["3", "", "/view/book~3"]],
              f"/view/book~2: the page links appear, {bar.inner_text()!r}, \"2\" the current one: {links()}")
        check(said, f"/view/book~2: the status line says page 2's size, 1500 x 2100: {status()!r}")
        shows(2, os.path.join(OUT, "book-page-2.png"))
        page.get_by_role("link", name="3", exact=True).click()
        page.wait_for_url(re.compile(r"/view/book~3(#.*)?$"), timeout=20000)
        said = waits(page, "size => document.getElementById('status').textContent === size", arg="1800 x 1800")
        waits(page, "() => !document.getElementById('pages').hidden")
        path = page.evaluate("location.pathname")
        check(path == "/view/book~3" and said,
              f"a click on \"3\" opens {path}, whose status line says page 3's size, 1800 x 1800: {status()!r}")
        check([c for _, c, _ in links()] == ["", "", "current"], f"/view/book~3: \"3\" is the current page: {links()}")
        shows(3, os.path.join(OUT, "book-page-3.png"))
        check(not bad, f"the book's pages: every request answered 200: {bad}")
        check(not errors, f"the book's pages: no error in the page's console: {errors}")
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"the book's pages: {type(error).__name__}: {str(error).splitlines()[0]} ({errors})")
    finally:
        page.close()
        server.terminate()
        server.wait(10)

def picker(browser):
    """The listing page as a picker of the folder's collection, followed by clicks as a person would:
    the folder's sub-folder, then its image; down into maps/old/; its image in the viewer; back up."""
    folder = tempfile.mkdtemp()
    make_image(os.path.join(folder, "top.jpg"), 1200, 800)
    os.makedirs(os.path.join(folder, "maps", "old"))
    # rome: another picture, portrait, upside down and its channels swapped, so it can't pass for top.
    make_image(os.path.join(folder, "maps", "old", "rome.jpg"), 900, 1200)
    flipped = np.asarray(Image.open(os.path.join(folder, "maps", "old", "rome.jpg")).convert("RGB"))[::-1, :, ::-1]
    Image.fromarray(np.ascontiguousarray(flipped)).save(os.path.join(folder, "maps", "old", "rome.jpg"), quality=95, subsampling=0)
    sources = {name: Image.open(os.path.join(folder, path)).convert("RGB")
               for name, path in [("top", "top.jpg"), ("rome", os.path.join("maps", "old", "rome.jpg"))]}
    server, port = serve(folder)
    base = f"http://127.0.0.1:{port}"
    page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
    errors, bad = [], []
    page.on("console", lambda m: errors.append(f"console: {m.text} (at {m.location.get('url') or '?'})") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status not in (200, 304) else None)
    page.on("requestfailed", lambda r: bad.append(f"failed {r.url} {r.failure}"))
    def rows():
        """The listing's rows: the name's text, its link's href as written, the size column, the
        thumbnail's src as written (or None)."""
        return page.evaluate("[...document.querySelectorAll('table tr')].slice(1).map(tr => {"
                             " const a = tr.cells[1].querySelector('a'), img = tr.cells[0].querySelector('img');"
                             " return [tr.cells[1].textContent, a && a.getAttribute('href'), tr.cells[2].textContent,"
                             " img && img.getAttribute('src')]; })")
    def trail():
        """The heading's text, and its links: [text, href as written, where it leads (path and query)]."""
        return page.evaluate("[document.querySelector('h1').textContent, [...document.querySelectorAll('h1 a')]"
                             ".map(a => [a.textContent, a.getAttribute('href'), new URL(a.href).pathname + new URL(a.href).search])]")
    def thumbnail(name, id, shot):
        """The thumbnail of image `name` (its identifier `id`) loads (naturalWidth > 0, the
        size !160,160 asks) and shows its picture: the window's pixels there against the source shrunk."""
        img = page.locator(f"img[src=\"iiif/3/{id}/full/!160,160/0/default.jpg\"]")
        loaded = waits(page, "src => { const i = [...document.images].find(i => i.getAttribute('src') === src);"
                             " return i && i.complete && i.naturalWidth > 0; }",
                       arg=f"iiif/3/{id}/full/!160,160/0/default.jpg")
        size = page.evaluate("src => { const i = [...document.images].find(i => i.getAttribute('src') === src);"
                             " return i ? [i.naturalWidth, i.naturalHeight] : null; }", f"iiif/3/{id}/full/!160,160/0/default.jpg")
        source = sources[name]
        z = min(160 / source.width, 160 / source.height)
        want_size = [round(source.width * z), round(source.height * z)]
        check(loaded and size is not None and abs(size[0] - want_size[0]) <= 1 and abs(size[1] - want_size[1]) <= 1,
              f"{name}'s thumbnail loads: {size} (naturalWidth > 0; {want_size[0]} x {want_size[1]}, within 160 x 160)")
        if not loaded:
            return
        # The window's pixels where the thumbnail is drawn: its box may start between two pixels (rows
        # drawn from the rounded start).
        w, h, box = *size, img.bounding_box()
        page.screenshot(path=shot, clip={"x": round(box["x"]), "y": round(box["y"]), "width": w, "height": h})
        got = np.asarray(Image.open(shot).convert("RGB"))
        want = np.asarray(source.resize((w, h), Image.LANCZOS))
        value = psnr(got[1:-1, 1:-1], want[1:-1, 1:-1])
        check(value >= 24, f"{name}'s thumbnail shows {name}: {value:.1f} dB against the source shrunk to {w} x {h} (at least 24)")
    where = lambda: page.evaluate("location.pathname + location.search")
    top_rows = [["maps/", "?folder=maps", "folder", None], ["top", "view/top", "1200 x 800", "iiif/3/top/full/!160,160/0/default.jpg"]]
    try:
        page.goto(f"{base}/")
        check(rows() == top_rows and trail() == ["Images", []],
              f"/ lists the folder maps/ then the image top, under the heading \"Images\": {rows()}, {trail()}")
        thumbnail("top", "top", os.path.join(OUT, "picker-thumbnail-top.png"))
        page.screenshot(path=os.path.join(OUT, "picker-top.png"))
        page.get_by_role("link", name="maps/", exact=True).click()
        page.wait_for_url(re.compile(r"/\?folder=maps$"), timeout=20000)
        check(where() == "/?folder=maps" and rows() == [["old/", "?folder=maps%2Fold", "folder", None]],
              f"a click on maps/ opens {where()}, listing the folder old/ only: {rows()}")
        check(trail() == ["Images / maps", [["Images", "./", "/"]]],
              f"/?folder=maps: the heading links back up to Images (\"./\", the top listing): {trail()}")
        page.screenshot(path=os.path.join(OUT, "picker-maps.png"))
        page.get_by_role("link", name="old/", exact=True).click()
        page.wait_for_url(re.compile(r"/\?folder=maps%2Fold$"), timeout=20000)
        rome_row = ["rome", "view/maps%2Fold%2Frome", "900 x 1200", "iiif/3/maps%2Fold%2Frome/full/!160,160/0/default.jpg"]
        check(where() == "/?folder=maps%2Fold" and rows() == [rome_row],
              f"a click on old/ opens {where()}, listing the image rome only: {rows()}")
        check(trail() == ["Images / maps / old", [["Images", "./", "/"], ["maps", "?folder=maps", "/?folder=maps"]]],
              f"/?folder=maps%2Fold: the heading links back up to Images and to maps: {trail()}")
        thumbnail("rome", "maps%2Fold%2Frome", os.path.join(OUT, "picker-thumbnail-rome.png"))
        page.screenshot(path=os.path.join(OUT, "picker-maps-old.png"))
        page.get_by_role("link", name="rome", exact=True).click()
        page.wait_for_url(re.compile(r"/view/maps%2Fold%2Frome(#.*)?$"), timeout=20000)
        said = waits(page, "size => document.getElementById('status').textContent === size", arg="900 x 1200")
        status = page.evaluate("document.getElementById('status').textContent")
        check(page.evaluate("location.pathname") == "/view/maps%2Fold%2Frome" and said and page.title() == "maps/old/rome",
              f"a click on rome opens {page.evaluate('location.pathname')}, titled {page.title()!r}, its status line the "
              f"size, 900 x 1200: {status!r}")
        # The screen (its bottom apart: the status line) against rome fitted: 525 x 700 at (237, 0).
        source = sources["rome"]
        z = min(VIEW_W / source.width, VIEW_H / source.height)
        w, h = round(source.width * z), round(source.height * z)
        ox, oy = (VIEW_W - w) // 2, (VIEW_H - h) // 2
        want = np.asarray(source.resize((w, h), Image.LANCZOS))
        settle(page)
        shot = os.path.join(OUT, "picker-view-rome.png")
        page.screenshot(path=shot)
        got = np.asarray(Image.open(shot).convert("RGB"))
        bottom = min(oy + h, VIEW_H - 60) - 2
        value = psnr(got[oy + 2:bottom, ox + 2:ox + w - 2], want[2:bottom - oy, 2:w - 2])
        check(value >= 24, f"the viewer shows maps/old/rome fitted, {w} x {h} at ({ox}, {oy}): {value:.1f} dB "
                           f"against the source shrunk (at least 24)")
        waits(page, HASH_IS, arg=["z", z, 1e-3])   # the viewer writes its fragment 100 ms after a change
        fitted = fragment(page)
        check(abs(fitted.get("z", 0) - z) < 1e-3, f"the viewer's view is rome fitted, zoom {z:.4f}: {fitted}")
        # Back (the browser's button) to the listing of maps/old, then up its trail: maps, then Images.
        page.go_back()
        page.wait_for_url(re.compile(r"/\?folder=maps%2Fold$"), timeout=20000)
        page.locator("h1").get_by_role("link", name="maps", exact=True).click()
        page.wait_for_url(re.compile(r"/\?folder=maps$"), timeout=20000)
        check(where() == "/?folder=maps" and rows() == [["old/", "?folder=maps%2Fold", "folder", None]],
              f"back, then a click on the heading's \"maps\" opens {where()}, listing old/: {rows()}")
        page.locator("h1").get_by_role("link", name="Images", exact=True).click()
        page.wait_for_url(re.compile(r"/$"), timeout=20000)
        check(where() == "/" and rows() == top_rows and trail() == ["Images", []],
              f"a click on the heading's \"Images\" opens {where()}, the top listing again: {rows()}, {trail()}")
        thumbnail("top", "top", os.path.join(OUT, "picker-thumbnail-top-again.png"))
        page.screenshot(path=os.path.join(OUT, "picker-top-again.png"))
        # The server's access log has the browser's own requests too (a favicon's), which the page's events leave
        # out. It is written in order by a thread of its own: read once it holds a last request of the test's,
        # made after the page's (and left out of the count).
        urlread(port, "/images/top?end-of-test")
        log = lambda: re.findall(r'"[A-Z]+ (\S+) HTTP/[0-9.]+" (\d{3})', open(os.path.join(folder, "serve.log")).read())
        deadline = time.time() + 20
        while not any(p == "/images/top?end-of-test" for p, _ in log()) and time.time() < deadline:
            time.sleep(0.05)
        answered = [(p, s) for p, s in log() if p != "/images/top?end-of-test"]
        refused = [f"{s} {p}" for p, s in answered if s not in ("200", "304")]
        check(not bad and answered and not refused,
              f"the picker's pages: every request answered 200 (or 304), as the page saw them: {bad}; in the server's "
              f"access log ({len(answered)} requests): {refused}")
        check(not errors, f"the picker's pages: no error in the page's console: {errors}")
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"the folder picker: {type(error).__name__}: {str(error).splitlines()[0]} ({errors})")
    finally:
        page.close()
        server.terminate()
        server.wait(10)

def cross_site(playwright, folder):
    """A page on another origin (a second local server, another port) tries to put an image into the
    tile server with fetch (with and without the token, with and without CORS) and a form POST; the
    tile server's folder must not change. Then the viewer reached as http://rebound.test:PORT (mapped
    to 127.0.0.1 in the browser, as a DNS rebinding would) must be refused."""
    server, port = serve(folder, "--allow-uploads", "--upload-token", "t")
    before = sorted(os.listdir(folder))
    site = tempfile.mkdtemp()
    open(os.path.join(site, "evil.html"), "w").write(f"""<!doctype html><html><body>
<form id="f" method="POST" action="http://127.0.0.1:{port}/images/formpost" enctype="text/plain">
<input name="x" value="y"></form>
<script>
const target = "http://127.0.0.1:{port}/images/";
const results = [];
async function attempt(name, init) {{
  try {{ const r = await fetch(target + name, init); results.push(name + ":" + r.status); }}
  catch (e) {{ results.push(name + ":blocked"); }}
}}
(async () => {{
  const body = new Uint8Array([0xFF, 0xD8, 0xFF, 0xD9]);
  await attempt("cors", {{method: "PUT", body}});
  await attempt("token", {{method: "PUT", body, headers: {{"Authorization": "Bearer t", "Content-Type": "image/jpeg"}}}});
  await attempt("nocors", {{method: "PUT", body, mode: "no-cors"}});
  await attempt("post", {{method: "POST", body, mode: "no-cors"}});
  document.title = "done " + results.join(" ");
}})();
</script></body></html>""")
    other = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", site],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        other_port = int(re.search(r"port (\d+)", other.stdout.readline()).group(1))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--host-resolver-rules=MAP rebound.test 127.0.0.1"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{other_port}/evil.html")
        waits(page, "() => document.title.startsWith('done')")
        title = page.title()
        check(all(a.endswith((":blocked", ":403", ":0")) for a in title.split()[1:]) and len(title.split()) == 5,
              f"every fetch from the other site is blocked by CORS or refused (403): {title!r}")
        # The form's POST: the page navigates to its answer (whatever it is) once the server has answered.
        with page.expect_navigation(timeout=20000):
            page.evaluate("document.getElementById('f').submit()")
        after = sorted(os.listdir(folder))
        check(after == before and not any(n.startswith(("cors", "token", "nocors", "post", "formpost", ".upload")) for n in after),
              f"another site's page stores nothing: {title!r}, the folder {before} -> {after}")
        response = page.goto(f"http://rebound.test:{port}/view/photo")
        check(response is not None and response.status == 421,
              f"the viewer reached under another host name (DNS rebinding) is refused: {response.status if response else None}")
        browser.close()
    finally:
        other.terminate()
        server.terminate()
        server.wait(10)

def urlread(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path)
    return connection.getresponse().read()

def urlstatus(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path)
    return connection.getresponse().status

def serve(folder, *options):
    """Starts `tiler serve folder --port 0 options...`; returns the process and the port it printed."""
    log = open(os.path.join(folder, "serve.log"), "w+")
    server = subprocess.Popen([TILER, "serve", folder, "--port", "0", *options], stderr=log, stdout=log)
    port = None
    for _ in range(200):
        log.seek(0)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read())
        if found:
            port = int(found.group(1))
            break
        time.sleep(0.05)
    check(port is not None, f"tiler serve {' '.join(options)} started")
    return server, port

def main():
    folder = tempfile.mkdtemp()
    make_image(os.path.join(folder, "photo.jpg"))
    source = np.asarray(Image.open(os.path.join(folder, "photo.jpg")).convert("RGB"))
    server, port = serve(folder, "--cache", os.path.join(folder, ".cache"))
    try:
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
            requested = []
            page.on("request", lambda r: requested.append(r.url))
            # 1. View states from the fragment, against the source's pixels.
            for (cx, cy, z, threshold) in [(1500, 1000, 1, 30), (1234, 777, 1, 30), (1500, 1000, 0.5, 27), (2000, 1300, 0.5, 27)]:
                page.goto(f"{base}/view/photo#x={cx}&y={cy}&z={z}")
                page.evaluate("document.getElementById('status').style.display = 'none'")   # (no <style>: the page's policy allows its own only)
                settle(page)
                shot = os.path.join(OUT, f"view-{cx}-{cy}-{z}.png")
                page.screenshot(path=shot)
                got = np.asarray(Image.open(shot).convert("RGB"))
                value = psnr(got, expected_view(source, cx, cy, z))
                check(value >= threshold, f"view x={cx} y={cy} z={z}: {value:.1f} dB against the source (at least {threshold})")
            # The default view: the whole image fitted and centred (0.333 here), the rest of the window empty.
            page.goto(f"{base}/view/photo")
            page.evaluate("document.getElementById('status').style.display = 'none'")   # (no <style>: the page's policy allows its own only)
            settle(page)
            waits(page, HASH_IS, arg=["z", 1 / 3, 1e-3])   # the viewer writes its fragment 100 ms after a change
            fitted = fragment(page)
            shot = os.path.join(OUT, "fitted.png")
            page.screenshot(path=shot)
            got = np.asarray(Image.open(shot).convert("RGB")).astype(np.float64)
            check(abs(fitted.get("z", 0) - 1 / 3) < 1e-3 and abs(fitted.get("x", 0) - 1500) < 1
                  and abs(fitted.get("y", 0) - 1000) < 1,
                  f"the default view fits the image: {fitted}")
            # 1000 x 666.7 pixels of image in a 1000 x 700 window: rows 17..683 hold it. Level 2 (750 x 500)
            # is drawn at 4/3: compare the middle of the window with the source shrunk by 3.
            small = np.asarray(Image.open(os.path.join(folder, "photo.jpg")).convert("RGB").resize((1000, 667), Image.BOX)).astype(np.float64)
            value = psnr(got[100:600, 100:900], small[83:583, 100:900])
            check(value >= 24, f"the fitted view against the source shrunk by 3: {value:.1f} dB (at least 24)")
            check(got[:10].max() < 60 and got[-10:].max() < 60, "above and below the image: the dark background")
            # 2. A drag and a wheel zoom.
            page.goto(f"{base}/view/photo#x=1500&y=1000&z=1")
            settle(page)
            page.mouse.move(500, 350)
            page.mouse.down()
            for step in range(1, 11):
                page.mouse.move(500 - 20 * step, 350 - 10 * step)
            page.mouse.up()
            # The fragment is rewritten 100 ms after the view last moved: wait for the view the drag makes.
            waits(page, HASH_IS, arg=["x", 1700, 1])
            moved = fragment(page)
            check(abs(moved["x"] - 1700) < 1 and abs(moved["y"] - 1100) < 1 and abs(moved["z"] - 1) < 1e-3,
                  f"a drag of (-200, -100) moves the centre to (1700, 1100): {moved}")
            settle(page)
            page.screenshot(path=os.path.join(OUT, "after-drag.png"))
            requested.clear()
            page.mouse.move(300, 200)
            page.mouse.wheel(0, 300)   # 2^(-300/300): zoom out by half, about the pointer
            waits(page, HASH_IS, arg=["z", 0.5, 1e-3])
            zoomed = fragment(page)
            # The image point under the pointer stays put: (1700 + (300 - 500) / 1, ...) at zoom 0.5.
            ix, iy = 1700 - 200, 1100 - 150
            want_x, want_y = ix + 200 / 0.5, iy + 150 / 0.5
            check(abs(zoomed["z"] - 0.5) < 1e-3 and abs(zoomed["x"] - want_x) < 1 and abs(zoomed["y"] - want_y) < 1,
                  f"a wheel step zooms to 0.5 about the pointer, centre ({want_x}, {want_y}): {zoomed}")
            settle(page)
            page.screenshot(path=os.path.join(OUT, "after-wheel.png"))
            # The tiles the page shows now (requested, or from the browser's cache): the level the zoom
            # needs (scale 2 at zoom 0.5) and the coarsest level's placeholder, nothing of level 0.
            shown = page.evaluate("[...document.querySelectorAll('#view img')].map(i => i.src)")
            scales = set()
            for u in shown:
                x, y, w, h, sw, sh = map(int, re.findall(r"/(\d+),(\d+),(\d+),(\d+)/(\d+),(\d+)/", u)[0])
                scales.add(round(max(w / sw, h / sh)))
            check(2 in scales and 1 not in scales and len(scales) == 2,
                  f"after zooming out the tiles shown are at scale 2, under the coarsest level's: {sorted(scales)}")
            fresh = [u for u in requested if "/iiif/3/photo/" in u and u.endswith(".jpg")]
            check(all(round(int(re.findall(r"/\d+,\d+,(\d+),\d+/(\d+),", u)[0][0]) / int(re.findall(r"/\d+,\d+,(\d+),\d+/(\d+),", u)[0][1])) >= 2 for u in fresh),
                  f"no level-0 tile was requested after zooming out ({len(fresh)} requests)")
            page.close()
            book(browser)
            picker(browser)
            uploading(browser)
            cross_site(p, folder)
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
    print(f"screenshots in {OUT}")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

if __name__ == "__main__":
    main()
